//! How errors reach the user: [`UserError`] (a message and a hint) and [`hint_of`], which finds
//! the hint in an error chain, whichever layer raised it.

/// An error for the user, with a hint on how to fix it.
#[derive(Debug)]
pub(crate) struct UserError {
    pub(crate) message: String,
    pub(crate) hint: String,
}

impl std::fmt::Display for UserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UserError {}

pub(crate) fn user_error(message: impl Into<String>, hint: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UserError {
        message: message.into(),
        hint: hint.into(),
    })
}

/// The hint of an error in a chain, when it is one the user can fix: a [`UserError`], or a
/// library error that carries a hint.
pub(crate) fn hint_of<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a str> {
    use band::client::ClientError;
    use band::vm::VmError;
    if let Some(user) = e.downcast_ref::<UserError>() {
        return Some(&user.hint);
    }
    if let Some(c) = e.downcast_ref::<ClientError>() {
        return c.hint();
    }
    if let Some(c) = e.downcast_ref::<Box<ClientError>>() {
        return c.hint();
    }
    if let Some(v) = e.downcast_ref::<VmError>() {
        return v.hint();
    }
    e.downcast_ref::<Box<VmError>>().and_then(|v| v.hint())
}
