//! The error type of `kf-transform`.

use kf_manifest::ManifestError;

/// What can go wrong while transforming a kernel. A kernel a transformation does not apply
/// to is not an error: [`crate::Transformation::apply`] answers `None` for it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransformError {
    /// The parent's or the child's manifest did not parse.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The parent's manifest text is not a TOML table.
    #[error("the manifest is not TOML: {0}")]
    ManifestToml(#[from] toml::de::Error),
    /// A child's manifest could not be written.
    #[error("writing a manifest: {0}")]
    Serialize(#[from] toml::ser::Error),
    /// The C grammar could not be loaded into the parser (a tree-sitter version mismatch).
    #[error("the C parser: {0}")]
    Parser(String),
}
