//! The errors of a scenario file, and the `Locator` that points them at a line and column.
//!
//! Every error names the file, the line, the column and the field (`client[1].steps[2]`), so
//! a typo never silently changes what runs. The syntax's errors, serde's and the
//! translation's all go through one `Locator`, so they all read alike.

use std::path::Path;

use toml::Spanned;

/// A scenario that cannot be read or makes no sense.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{file}: {message}")]
    Io {
        /// The file.
        file: String,
        /// The system's message.
        message: String,
    },
    /// The file is malformed or inconsistent.
    #[error("{file}:{line}:{column}: `{field}`: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The field's path, such as `client[1].steps[2]`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl ScenarioError {
    pub(crate) fn io(path: &Path, e: &std::io::Error) -> Self {
        Self::Io {
            file: path.display().to_string(),
            message: e.to_string(),
        }
    }

    /// The offending field's path, for an invalid file.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Invalid { field, .. } => Some(field),
            Self::Io { .. } => None,
        }
    }

    /// The 1-based line, for an invalid file.
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::Invalid { line, .. } => Some(*line),
            Self::Io { .. } => None,
        }
    }
}

/// Where in the text an error points.
pub(crate) struct Locator<'a> {
    pub(crate) file: &'a str,
    pub(crate) text: &'a str,
}

impl Locator<'_> {
    pub(crate) fn error(
        &self,
        offset: usize,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ScenarioError {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1;
        ScenarioError::Invalid {
            file: self.file.to_owned(),
            line,
            column,
            field: field.into(),
            message: message.into(),
        }
    }

    /// Deserializes the whole text as TOML into `T`: a syntax error or a field that does
    /// not fit is pointed at its line, column and field's path.
    pub(crate) fn deserialize<T: serde::de::DeserializeOwned>(&self) -> Result<T, ScenarioError> {
        let deserializer = toml::Deserializer::parse(self.text)
            .map_err(|e| self.error(e.span().map_or(0, |s| s.start), "(syntax)", e.message()))?;
        serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let field = field_path(&e.path().to_string());
            let inner = e.into_inner();
            self.error(inner.span().map_or(0, |s| s.start), field, inner.message())
        })
    }

    pub(crate) fn at<T>(
        &self,
        spanned: &Spanned<T>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ScenarioError {
        self.error(spanned.span().start, field, message)
    }
}

/// The field's path as the file's author wrote it: `toml::Spanned` keeps a value's place in
/// the file by wrapping it in a struct whose one field serde names `$__serde_spanned_private_value`,
/// which would otherwise end the path of every located field.
fn field_path(serde_path: &str) -> String {
    serde_path
        .split('.')
        .filter(|segment| !segment.starts_with("$__"))
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_become_one_based_lines_and_columns() {
        let at = Locator {
            file: "f.toml",
            text: "ab\ncd\n",
        };
        let place = |offset| match at.error(offset, "x", "y") {
            ScenarioError::Invalid { line, column, .. } => (line, column),
            ScenarioError::Io { .. } => (0, 0),
        };
        assert_eq!(place(0), (1, 1));
        assert_eq!(place(1), (1, 2));
        assert_eq!(place(3), (2, 1));
        // An offset past the end (a span toml could not give) points just after the text.
        assert_eq!(place(99), (3, 1));
    }
}
