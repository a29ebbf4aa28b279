//! `gak-gen [--check | --dump] [ROOT]`: regenerate every host's
//! contract-derived files from ROOT/wit (default: this checkout); with
//! `--check` only list the stale ones (exit 1 if any); with `--dump` print
//! the contract as the generators see it.
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut check = false;
    let mut dump = false;
    let mut root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--check" => check = true,
            "--dump" => dump = true,
            "-h" | "--help" => {
                println!("usage: gak-gen [--check | --dump] [ROOT]");
                return ExitCode::SUCCESS;
            }
            other => root = PathBuf::from(other),
        }
    }
    if dump {
        return match gak_gen::Contract::load(&root.join("wit")) {
            Ok(c) => {
                println!("{c:#?}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("gak-gen: {e}");
                ExitCode::from(2)
            }
        };
    }
    let result = if check {
        gak_gen::stale(&root)
    } else {
        gak_gen::write(&root)
    };
    match result {
        Ok(paths) if check && !paths.is_empty() => {
            for p in &paths {
                println!("stale: {}", p.display());
            }
            ExitCode::FAILURE
        }
        Ok(paths) => {
            for p in &paths {
                println!("wrote {}", p.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gak-gen: {e}");
            ExitCode::from(2)
        }
    }
}
