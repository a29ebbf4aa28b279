//! Generated files for python.
use std::path::Path;

use crate::{Contract, Output};

pub fn emit(c: &Contract, root: &Path) -> Result<Vec<Output>, String> {
    let _ = (c, root);
    Ok(Vec::new())
}
