//! The band protocol's framing over a remote command's stdout, as the host target frames it: one
//! request line in, event lines and one result line out (`band::proto`). Lines are capped
//! ([`MAX_LINE_BYTES`]); anything that is not a protocol message, a second result, or a line
//! after the result fails the run (a VM is a boundary: its output is not trusted to be
//! well-formed).

use std::io::BufRead;

use crate::proto::{Event, Message, RunResult};

/// The longest protocol line accepted: a result carries the written files (base64), which
/// band-server caps well below this.
pub const MAX_LINE_BYTES: usize = 512 << 20;
/// The most stderr kept from a remote command.
pub const MAX_STDERR_BYTES: usize = 64 << 10;
/// Why a protocol stream was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("a line from band-server exceeds {0} bytes")]
    TooLong(usize),
    #[error("band-server sent a line that is not a protocol message: {0}")]
    NotAMessage(String),
    #[error("band-server sent a request")]
    UnexpectedRequest,
    #[error("band-server sent something after its result")]
    AfterResult,
    #[error("reading from band-server: {0}")]
    Io(String),
}

/// Read one `\n`-terminated line of at most `max` bytes (without the newline). `None` at EOF;
/// a last line without newline is returned as is.
pub fn read_line_capped(
    r: &mut impl BufRead,
    max: usize,
) -> std::result::Result<Option<Vec<u8>>, FrameError> {
    let mut line = Vec::new();
    loop {
        let buf = r.fill_buf().map_err(|e| FrameError::Io(e.to_string()))?;
        if buf.is_empty() {
            return Ok(if line.is_empty() { None } else { Some(line) });
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if line.len() + chunk.len() > max {
            return Err(FrameError::TooLong(max));
        }
        line.extend_from_slice(chunk);
        let used = done.unwrap_or(buf.len());
        r.consume(used);
        if done.is_some() {
            return Ok(Some(line));
        }
    }
}

/// Read a whole protocol stream: events go to `on_event`; returns the result (None if the
/// stream ended without one).
pub fn read_stream(
    r: &mut impl BufRead,
    max: usize,
    on_event: &mut dyn FnMut(&Event),
) -> std::result::Result<Option<RunResult>, FrameError> {
    let mut result = None;
    while let Some(line) = read_line_capped(r, max)? {
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        if result.is_some() {
            return Err(FrameError::AfterResult);
        }
        let msg: Message = serde_json::from_slice(&line).map_err(|e| {
            let shown: String = String::from_utf8_lossy(&line[..line.len().min(120)]).into_owned();
            FrameError::NotAMessage(format!("{e}: `{shown}`"))
        })?;
        match msg {
            Message::Event(ev) => on_event(&ev),
            Message::Result(r) => result = Some(*r),
            Message::Request(_)
            | Message::Hold
            | Message::Cancel
            | Message::Go
            | Message::Stdin { .. }
            | Message::Signal { .. } => {
                return Err(FrameError::UnexpectedRequest);
            }
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Layer, Status};
    use std::io::{BufReader, Cursor};

    fn line(m: &Message) -> String {
        serde_json::to_string(m).unwrap()
    }

    fn result_line() -> String {
        line(&Message::Result(Box::new(RunResult::setup_failed(
            "0011223344556677",
            Layer::Io,
            "x",
            None,
        ))))
    }

    #[test]
    fn lines_are_split_and_capped() {
        let mut r = Cursor::new(b"ab\ncd\nlast".to_vec());
        assert_eq!(read_line_capped(&mut r, 10).unwrap(), Some(b"ab".to_vec()));
        assert_eq!(read_line_capped(&mut r, 10).unwrap(), Some(b"cd".to_vec()));
        assert_eq!(
            read_line_capped(&mut r, 10).unwrap(),
            Some(b"last".to_vec())
        );
        assert_eq!(read_line_capped(&mut r, 10).unwrap(), None);
        let mut long = Cursor::new(vec![b'x'; 100]);
        assert_eq!(
            read_line_capped(&mut long, 99),
            Err(FrameError::TooLong(99))
        );
        // The cap counts across buffer refills.
        let mut small = BufReader::with_capacity(4, Cursor::new(b"0123456789\n".to_vec()));
        assert_eq!(read_line_capped(&mut small, 9), Err(FrameError::TooLong(9)));
        let mut small = BufReader::with_capacity(4, Cursor::new(b"0123456789\n".to_vec()));
        assert_eq!(
            read_line_capped(&mut small, 10).unwrap(),
            Some(b"0123456789".to_vec())
        );
    }

    #[test]
    fn a_stream_gives_events_then_the_result() {
        let ev = line(&Message::Event(Event::Stdout { data: "hi".into() }));
        let text = format!("{ev}\n\n{ev}\n{}\n", result_line());
        let mut seen = 0;
        let r = read_stream(&mut Cursor::new(text.into_bytes()), 1 << 20, &mut |_| {
            seen += 1
        })
        .unwrap();
        assert_eq!(seen, 2);
        assert_eq!(r.map(|r| r.status), Some(Status::SetupFailed));
    }

    #[test]
    fn garbage_duplicates_and_requests_fail_the_stream() {
        let noop = &mut |_: &Event| {};
        let garbage = "hello from a compromised VM\n".to_string();
        assert!(matches!(
            read_stream(&mut Cursor::new(garbage.into_bytes()), 1 << 20, noop),
            Err(FrameError::NotAMessage(_))
        ));
        let twice = format!("{}\n{}\n", result_line(), result_line());
        assert_eq!(
            read_stream(&mut Cursor::new(twice.into_bytes()), 1 << 20, noop),
            Err(FrameError::AfterResult)
        );
        let ev_after = format!(
            "{}\n{}\n",
            result_line(),
            line(&Message::Event(Event::Stdout {
                data: "late".into()
            }))
        );
        assert_eq!(
            read_stream(&mut Cursor::new(ev_after.into_bytes()), 1 << 20, noop),
            Err(FrameError::AfterResult)
        );
        let huge = format!("{}\n", result_line());
        assert_eq!(
            read_stream(&mut Cursor::new(huge.into_bytes()), 16, noop),
            Err(FrameError::TooLong(16))
        );
        assert_eq!(
            read_stream(&mut Cursor::new(Vec::new()), 16, noop),
            Ok(None)
        );
    }
}
