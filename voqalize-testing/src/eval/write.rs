//! A [`SuiteReport`] written to a folder: the table, the transcripts and the JUnit XML, each in
//! its file.

use std::path::{Path, PathBuf};

use super::report::SuiteReport;

/// A report that could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// A file (or the folder) could not be written.
    #[error("could not write the eval report {}", path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl SuiteReport {
    /// Writes the report into `dir` (made when missing): `report.txt` (the table, as
    /// `Display`), `transcripts.txt` ([`transcripts`](Self::transcripts)) and `junit.xml`
    /// ([`junit_xml`](Self::junit_xml)), replacing files of those names.
    ///
    /// # Errors
    /// [`ReportError::Write`] naming the folder or file that could not be written.
    pub fn write_to(&self, dir: impl AsRef<Path>) -> Result<(), ReportError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| ReportError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        for (name, text) in [
            ("report.txt", self.to_string()),
            ("transcripts.txt", self.transcripts()),
            ("junit.xml", self.junit_xml()),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|source| ReportError::Write { path, source })?;
        }
        Ok(())
    }
}
