//! The one error type of the run pipeline: which sandbox layer failed, what happened, and what
//! to do about it. It becomes `proto::ErrorInfo` (and a `setup_failed` result) unchanged.

use std::fmt;

use band::proto::Layer;

/// A layer that could not be set up (or a request that was refused before anything was set up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupError {
    pub layer: Layer,
    pub message: String,
    pub hint: Option<String>,
}

impl SetupError {
    pub fn new(layer: Layer, message: impl Into<String>) -> Self {
        SetupError {
            layer,
            message: message.into(),
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.layer.as_str(), self.message)
    }
}

impl std::error::Error for SetupError {}

pub type SetupResult<T> = Result<T, SetupError>;

/// Attach a layer and a description of the step to any error: `fs::write(p).layer(Layer::Io,
/// format!("failed to write {}", p.display()))?` reads as "io: failed to write …: `<err>`".
pub(crate) trait LayerExt<T> {
    fn layer(self, layer: Layer, what: impl fmt::Display) -> SetupResult<T>;
}

impl<T, E: fmt::Display> LayerExt<T> for Result<T, E> {
    fn layer(self, layer: Layer, what: impl fmt::Display) -> SetupResult<T> {
        self.map_err(|e| SetupError::new(layer, format!("{what}: {e}")))
    }
}
