//! The pod's token: read once from a file (a mounted Secret), required on both ports as
//! `authorization: Bearer <token>`, compared in constant time.

use std::path::Path;

use subtle::ConstantTimeEq;

/// The shortest token accepted: 16 bytes (a guessable token is no gate).
pub const MIN_LEN: usize = 16;

/// The token a request must carry.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// The token in `path` (surrounding whitespace, such as a trailing newline, trimmed).
    pub fn read(path: &Path) -> anyhow::Result<Token> {
        let text = fs_err::read_to_string(path)?;
        Token::new(text.trim()).map_err(|m| anyhow::anyhow!("{}: {m}", path.display()))
    }

    pub fn new(token: &str) -> Result<Token, String> {
        if token.len() < MIN_LEN {
            return Err(format!(
                "the token has {} bytes; at least {MIN_LEN} are required",
                token.len()
            ));
        }
        Ok(Token(token.as_bytes().to_vec()))
    }

    /// Whether an `authorization` header's value is `Bearer <this token>`.
    pub fn admits(&self, header: Option<&[u8]>) -> bool {
        let Some(given) = header.and_then(|h| h.strip_prefix(b"Bearer ")) else {
            return false;
        };
        // Constant time over the contents; the length is not a secret worth hiding.
        given.len() == self.0.len() && bool::from(given.ct_eq(&self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bearer_token_itself_is_admitted() {
        let t = Token::new("0123456789abcdef").unwrap();
        assert!(t.admits(Some(b"Bearer 0123456789abcdef")));
        assert!(!t.admits(Some(b"Bearer 0123456789abcdeF")));
        assert!(!t.admits(Some(b"Bearer 0123456789abcde")));
        assert!(!t.admits(Some(b"0123456789abcdef")));
        assert!(!t.admits(Some(b"Basic 0123456789abcdef")));
        assert!(!t.admits(None));
        assert!(Token::new("short").is_err());
    }
}
