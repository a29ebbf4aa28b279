//! `gak component`: the exact component bytes this binary runs, and the WIT
//! package it implements, for hosts in other languages.
use std::io::Write;
use std::path::Path;

use super::args::ComponentArgs;
use super::failure::{Failure, Outcome};

/// `wit/*.wit` as (file name, text), embedded by `build.rs`.
const WIT: &[(&str, &str)] = &include!(concat!(env!("OUT_DIR"), "/builtin_wit.rs"));

/// Run `gak component`.
pub fn run(args: ComponentArgs) -> Outcome {
    if let Some(out) = &args.out {
        write_component(out)?;
    }
    if let Some(dir) = &args.wit {
        write_wit(dir)?;
    }
    Ok(())
}

fn write_component(out: &Path) -> Outcome {
    let bytes = gak::COMPONENT_WASM;
    if out == Path::new("-") {
        let mut stdout = std::io::stdout().lock();
        return stdout
            .write_all(bytes)
            .and_then(|()| stdout.flush())
            .map_err(|e| Failure::Storage(format!("cannot write the component to stdout: {e}")));
    }
    std::fs::write(out, bytes).map_err(|e| {
        Failure::Storage(format!(
            "cannot write the component to {}: {e}",
            out.display()
        ))
    })?;
    eprintln!(
        "wrote the gak:kernel component ({} bytes) to {}",
        bytes.len(),
        out.display()
    );
    Ok(())
}

fn write_wit(dir: &Path) -> Outcome {
    let fail = |e: std::io::Error| {
        Failure::Storage(format!(
            "cannot write the WIT package to {}: {e}",
            dir.display()
        ))
    };
    std::fs::create_dir_all(dir).map_err(fail)?;
    for (name, text) in WIT {
        std::fs::write(dir.join(name), text).map_err(fail)?;
    }
    eprintln!(
        "wrote the gak:kernel WIT package ({} files) to {}",
        WIT.len(),
        dir.display()
    );
    Ok(())
}
