//! The Go generator's promises: its files are what gofmt prints, and what
//! the WIT adds reaches the Go types, their conversions to and from the C
//! structs, and the conformance mapper.
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::emit;
use crate::model::{Field, Kind, Ty};
use crate::{Contract, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn contract() -> Contract {
    Contract::load(&root().join("wit")).expect("wit/ parses")
}

fn file<'a>(outputs: &'a [Output], path: &str) -> &'a str {
    &outputs
        .iter()
        .find(|o| o.path.to_str() == Some(path))
        .unwrap_or_else(|| panic!("no {path}"))
        .text
}

#[test]
fn the_files_are_what_gofmt_prints() {
    let outputs = emit(&contract(), &root()).expect("the generator runs");
    if Command::new("gofmt")
        .arg("-l")
        .arg("/dev/null")
        .output()
        .is_err()
    {
        eprintln!("gofmt is not installed: not checked here (tests/tests/go.rs runs gofmt -l)");
        return;
    }
    for o in &outputs {
        let mut child = Command::new("gofmt")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gofmt");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(o.text.as_bytes())
            .expect("write");
        let out = child.wait_with_output().expect("gofmt");
        assert!(
            out.status.success(),
            "{}: {}",
            o.path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            o.text,
            "{} is not what gofmt prints",
            o.path.display()
        );
    }
}

#[test]
fn a_field_the_wit_adds_reaches_every_go_file() {
    let mut c = contract();
    let task = c.types.iter_mut().find(|t| t.name == "task").expect("task");
    let Kind::Record(fields) = &mut task.kind else {
        panic!("task is a record")
    };
    fields.push(Field {
        name: "note".into(),
        ty: Ty::Option(Box::new(Ty::String)),
        docs: String::new(),
    });
    let outputs = emit(&c, &root()).expect("the generator runs");
    assert!(file(&outputs, "host/go/types_gen.go").contains("\tNote string\n"));
    assert!(file(&outputs, "host/go/abi_gen.go").contains("x.Note = goStr(c.note)"));
    assert!(file(&outputs, "host/go/format_gen.go").contains("Note:%q"));
    assert!(
        file(&outputs, "host/go/internal/conformance/exports_gen.go")
            .contains("o[\"note\"] = x.Note")
    );
}

/// An `s32` is an `int32` (a `C.int32_t` across cgo), read by `readS32` /
/// `readOptS32` and written signed.
#[test]
fn an_s32_field_is_an_int32() {
    let mut c = contract();
    for (record, ty) in [
        ("task", Ty::S32),
        ("task-seed", Ty::Option(Box::new(Ty::S32))),
    ] {
        let t = c.types.iter_mut().find(|t| t.name == record).expect(record);
        let Kind::Record(fields) = &mut t.kind else {
            panic!("{record} is a record")
        };
        fields.push(Field {
            name: "urgency".into(),
            ty,
            docs: String::new(),
        });
    }
    let outputs = emit(&c, &root()).expect("the generator runs");
    let types = file(&outputs, "host/go/types_gen.go");
    assert!(
        types
            .lines()
            .any(|l| l.starts_with("\tUrgency ") && l.trim_end().ends_with(" int32")),
        "{types}"
    );
    assert!(types.contains("*int32\n"));
    let abi = file(&outputs, "host/go/abi_gen.go");
    assert!(abi.contains("x.Urgency = int32(c.urgency)"));
    assert!(abi.contains("c.urgency = C.int32_t(*x.Urgency)"));
    let calls = file(&outputs, "host/go/internal/conformance/exports_gen.go");
    assert!(calls.contains("o[\"urgency\"] = snum(int64(x.Urgency))"));
    assert!(calls.contains("readOptS32(o[\"urgency\"], at+\".urgency\")"));
}
