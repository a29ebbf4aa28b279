//! Generated files for store.
use std::path::Path;

use crate::{Contract, Output};

/// The files besides `wit/` this module reads.
pub const INPUTS: &[&str] = &[];

pub fn emit(c: &Contract, root: &Path) -> Result<Vec<Output>, String> {
    let _ = (c, root);
    Ok(Vec::new())
}
