//! Opening the store an operator command acts on.
use std::path::Path;

use gak::blocking::Kernel;

use super::failure::Failure;

/// Whether the command may create the store when it does not exist yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Create {
    /// Only `tasks seed` creates: a typo in a path must not answer "no
    /// tasks" from a database made on the spot.
    Allowed,
    /// Every other command needs an existing SQLite database.
    Refused,
}

/// Open a kernel on `url` with the system clock.
pub fn open(url: &str, create: Create) -> Result<Kernel, Failure> {
    if create == Create::Refused
        && let Some(path) = sqlite_path(url)
        && !Path::new(path).exists()
    {
        return Err(Failure::Usage(format!(
            "no SQLite database at {path} (only `gak tasks seed` creates one)"
        )));
    }
    let kernel = Kernel::open(url)?;
    tracing::debug!(store = %kernel.backend().describe(), "opened the store");
    Ok(kernel)
}

/// The file of a `sqlite:PATH[?options]` URL (or a bare `*.db` path).
fn sqlite_path(url: &str) -> Option<&str> {
    let path = match url.strip_prefix("sqlite:") {
        Some(rest) => rest,
        None if url.ends_with(".db") || url.ends_with(".sqlite") => url,
        None => return None,
    };
    Some(path.split_once('?').map_or(path, |(p, _)| p))
}
