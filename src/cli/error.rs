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

/// Report an error that ended a command, once, the same way for every command: on stderr as
/// `error: …` and `hint: …`, or, under `--json`, as one JSON object on stdout (`status`
/// `error`, `message`, `hint`, `exit_code`: the fields of MCP error results). Returns the exit
/// code. A closed stdout (`band list | head`) is not an error; a closed pipe to band-server is.
pub(crate) fn report(err: &anyhow::Error, json: bool) -> u8 {
    if closed_stdout(err) {
        return band::proto::exit::OK;
    }
    let message = format!("{err:#}");
    let hint = err.chain().find_map(hint_of);
    emit(&message, hint, json)
}

/// Whether `err` is band's own stdout closed by its reader (`band list | head`): a broken pipe
/// that no step of a run raised. A pipe to band-server (or to sudo, ssh, a VM) that broke is a
/// run that could not be sent or heard: an error with its cause, never a silent exit 0 that an
/// agent would read as success.
fn closed_stdout(err: &anyhow::Error) -> bool {
    use band::client::ClientError;
    use band::vm::VmError;
    let broken = err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    });
    let of_a_run = err.chain().any(|e| {
        e.is::<ClientError>()
            || e.is::<Box<ClientError>>()
            || e.is::<VmError>()
            || e.is::<Box<VmError>>()
    });
    broken && !of_a_run
}

/// Report a command line clap refused: clap's own text (help and version are not errors), or
/// under `--json` the JSON object of [`report`].
pub(crate) fn report_usage(err: &clap::Error, json: bool) -> u8 {
    use clap::error::ErrorKind;
    if !json
        || matches!(
            err.kind(),
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
        )
    {
        let _ = err.print();
        return u8::try_from(err.exit_code()).unwrap_or(band::proto::exit::USAGE);
    }
    let text = err.render().to_string();
    let message = text
        .lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("error: ")
        .to_string();
    let tip = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("tip: "))
        .map(str::to_string);
    let hint =
        tip.unwrap_or_else(|| "`band --help` and `band help <command>` show the usage".into());
    emit(&message, Some(&hint), json)
}

fn emit(message: &str, hint: Option<&str>, json: bool) -> u8 {
    let code = band::proto::exit::USAGE;
    if json {
        let doc = serde_json::json!({
            "status": "error",
            "message": message,
            "hint": hint,
            "exit_code": code,
        });
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        let _ = super::render::write_stdout(&format!("{text}\n"));
    } else {
        // An error may quote what a skill folder holds (a rule, a name, a path): inert, as every
        // other text band shows (issue 36).
        eprintln!("error: {}", super::render::for_terminal(message));
        if let Some(hint) = hint {
            eprintln!("\nhint: {}", super::render::for_terminal(hint));
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::closed_stdout;
    use band::client::ClientError;
    use std::io::{Error, ErrorKind};

    #[test]
    fn a_closed_stdout_is_not_an_error_but_a_broken_pipe_to_band_server_is() {
        let stdout = anyhow::Error::new(Error::from(ErrorKind::BrokenPipe));
        assert!(closed_stdout(&stdout));
        let server = anyhow::Error::new(ClientError::Server {
            what: "cannot send the request to band-server",
            source: Error::from(ErrorKind::BrokenPipe),
        });
        assert!(!closed_stdout(&server));
        let wrapped = anyhow::Error::new(server.downcast::<ClientError>().expect("client"))
            .context("band run");
        assert!(!closed_stdout(&wrapped));
        let other = anyhow::Error::new(Error::from(ErrorKind::NotFound));
        assert!(!closed_stdout(&other));
    }
}
