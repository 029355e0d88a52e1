//! The one error type of the run pipeline: which sandbox layer failed, what happened, and what
//! to do about it. It becomes `proto::ErrorInfo` (and a `setup_failed` result) unchanged.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use band::proto::Layer;

/// A layer that could not be set up (or a request that was refused before anything was set up).
///
/// `layer`, `message` and `hint` are what goes on the wire; `source` is the error a step failed
/// with, when [`LayerExt::layer`] wrapped one (its text is already the end of `message`), kept
/// for logs and error chains. Two errors are equal when their wire parts are.
#[derive(Debug, Clone)]
pub struct SetupError {
    pub layer: Layer,
    pub message: String,
    pub hint: Option<String>,
    source: Option<Arc<dyn Error + Send + Sync>>,
}

impl PartialEq for SetupError {
    fn eq(&self, other: &Self) -> bool {
        self.layer == other.layer && self.message == other.message && self.hint == other.hint
    }
}

impl Eq for SetupError {}

impl SetupError {
    pub fn new(layer: Layer, message: impl Into<String>) -> Self {
        SetupError {
            layer,
            message: message.into(),
            hint: None,
            source: None,
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

impl Error for SetupError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}

pub type SetupResult<T> = Result<T, SetupError>;

/// Attach a layer and a description of the step to any error: `fs::write(p).layer(Layer::Io,
/// format!("failed to write {}", p.display()))?` reads as "io: failed to write …: `<err>`".
pub(crate) trait LayerExt<T> {
    fn layer(self, layer: Layer, what: impl fmt::Display) -> SetupResult<T>;
}

impl<T, E: fmt::Display + Into<Box<dyn Error + Send + Sync>>> LayerExt<T> for Result<T, E> {
    fn layer(self, layer: Layer, what: impl fmt::Display) -> SetupResult<T> {
        self.map_err(|e| {
            let message = format!("{what}: {e}");
            SetupError {
                source: Some(Arc::from(e.into())),
                ..SetupError::new(layer, message)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_keeps_the_source_and_the_wire_text() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = Err::<(), _>(io)
            .layer(Layer::Io, "failed to read /x")
            .unwrap_err();
        assert_eq!(e.message, "failed to read /x: no such file");
        assert_eq!(e.to_string(), "io: failed to read /x: no such file");
        let source = e.source().map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("no such file"));
        assert_eq!(
            e,
            SetupError::new(Layer::Io, "failed to read /x: no such file")
        );
        assert!(SetupError::new(Layer::Io, "m").source().is_none());
    }
}
