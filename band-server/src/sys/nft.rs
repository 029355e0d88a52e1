//! libnftables (`libnftables.so.1`), opened at run time: nftables in process, without a `nft`
//! process per command.

use std::ffi::{CStr, CString};

/// Why libnftables could not be opened, or a command of it failed. A failed command's error is
/// libnftables' own message, as `nft` prints it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NftLibraryError {
    #[error("libnftables.so.1: {source}")]
    Open { source: libloading::Error },
    #[error("libnftables.so.1: {name}: {source}")]
    Symbol {
        name: &'static str,
        source: libloading::Error,
    },
    #[error("libnftables.so.1: nft_ctx_new failed")]
    NewContext,
    #[error("libnftables.so.1: cannot buffer its output")]
    Buffer,
    #[error("the commands contain NUL")]
    Nul,
    /// What libnftables wrote to its error buffer, trimmed.
    #[error("{stderr}")]
    Command { stderr: String },
}

/// libnftables (`libnftables.so.1`), opened at run time: the library the `nft` program is a
/// front end to. One context; the caller holds it behind a lock (a context is not for two
/// threads at once). Output and errors are buffered and returned per command.
pub(crate) struct NftLibrary {
    /// Keeps the library mapped while the functions below are used.
    _lib: libloading::Library,
    ctx: std::ptr::NonNull<libc::c_void>,
    run: unsafe extern "C" fn(*mut libc::c_void, *const libc::c_char) -> libc::c_int,
    output: unsafe extern "C" fn(*mut libc::c_void) -> *const libc::c_char,
    error: unsafe extern "C" fn(*mut libc::c_void) -> *const libc::c_char,
    set_flags: unsafe extern "C" fn(*mut libc::c_void, libc::c_uint),
    free: unsafe extern "C" fn(*mut libc::c_void),
}

// SAFETY: the context is only reached through `&mut self` (one thread at a time), and
// libnftables keeps no thread-local state of its own.
unsafe impl Send for NftLibrary {}

/// `NFT_CTX_OUTPUT_JSON` of libnftables.h: listings in JSON, as `nft -j`.
const NFT_CTX_OUTPUT_JSON: libc::c_uint = 1 << 4;

impl NftLibrary {
    /// Open `libnftables.so.1` and make a context with buffered output and errors.
    pub(crate) fn open() -> Result<NftLibrary, NftLibraryError> {
        // SAFETY: loading libnftables runs its initialisers, which only set up its own state.
        let lib = unsafe { libloading::Library::new("libnftables.so.1") }
            .map_err(|source| NftLibraryError::Open { source })?;
        /// The function `name` of `lib`, as the C signature `F` (a copy of the pointer).
        ///
        /// # Safety
        /// `F` must be the signature libnftables.h gives `name`.
        unsafe fn sym<F: Copy>(
            lib: &libloading::Library,
            name: &'static str,
        ) -> Result<F, NftLibraryError> {
            // SAFETY: the caller's; the pointer stays valid while `lib` is loaded, which
            // NftLibrary keeps.
            unsafe { lib.get::<F>(name.as_bytes()) }
                .map(|f| *f)
                .map_err(|source| NftLibraryError::Symbol { name, source })
        }
        type Ctx = *mut libc::c_void;
        // SAFETY: each signature is the one libnftables.h gives the function.
        let (new, buffer_output, buffer_error, run, output, error, set_flags, free) = unsafe {
            (
                sym::<unsafe extern "C" fn(u32) -> Ctx>(&lib, "nft_ctx_new")?,
                sym::<unsafe extern "C" fn(Ctx) -> libc::c_int>(&lib, "nft_ctx_buffer_output")?,
                sym::<unsafe extern "C" fn(Ctx) -> libc::c_int>(&lib, "nft_ctx_buffer_error")?,
                sym::<unsafe extern "C" fn(Ctx, *const libc::c_char) -> libc::c_int>(
                    &lib,
                    "nft_run_cmd_from_buffer",
                )?,
                sym::<unsafe extern "C" fn(Ctx) -> *const libc::c_char>(
                    &lib,
                    "nft_ctx_get_output_buffer",
                )?,
                sym::<unsafe extern "C" fn(Ctx) -> *const libc::c_char>(
                    &lib,
                    "nft_ctx_get_error_buffer",
                )?,
                sym::<unsafe extern "C" fn(Ctx, libc::c_uint)>(&lib, "nft_ctx_output_set_flags")?,
                sym::<unsafe extern "C" fn(Ctx)>(&lib, "nft_ctx_free")?,
            )
        };
        // SAFETY: nft_ctx_new(NFT_CTX_DEFAULT) returns a new context or NULL.
        let ctx = std::ptr::NonNull::new(unsafe { new(0) }).ok_or(NftLibraryError::NewContext)?;
        // SAFETY: ctx is the live context made above.
        let buffered =
            unsafe { buffer_output(ctx.as_ptr()) == 0 && buffer_error(ctx.as_ptr()) == 0 };
        if !buffered {
            // SAFETY: ctx is live and freed once, here.
            unsafe { free(ctx.as_ptr()) };
            return Err(NftLibraryError::Buffer);
        }
        Ok(NftLibrary {
            _lib: lib,
            ctx,
            run,
            output,
            error,
            set_flags,
            free,
        })
    }

    /// Run `commands` (one or more lines, applied as one transaction, as `nft -f`), listings in
    /// JSON when `json`. What it printed, or its error messages.
    pub(crate) fn run(&mut self, commands: &str, json: bool) -> Result<String, NftLibraryError> {
        let text = CString::new(commands).map_err(|_| NftLibraryError::Nul)?;
        let flags = if json { NFT_CTX_OUTPUT_JSON } else { 0 };
        let ctx = self.ctx.as_ptr();
        // SAFETY: ctx is live; text outlives the call; the buffers returned are owned by the
        // context, NUL-terminated, and copied out before the next call on it.
        unsafe {
            (self.set_flags)(ctx, flags);
            let rc = (self.run)(ctx, text.as_ptr());
            let copy = |p: *const libc::c_char| {
                if p.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            };
            let out = copy((self.output)(ctx));
            let err = copy((self.error)(ctx));
            if rc == 0 {
                Ok(out)
            } else {
                Err(NftLibraryError::Command {
                    stderr: err.trim().to_string(),
                })
            }
        }
    }
}

impl std::fmt::Debug for NftLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("libnftables.so.1")
    }
}

impl Drop for NftLibrary {
    fn drop(&mut self) {
        // SAFETY: the context is live and freed once, here, before the library is unmapped.
        unsafe { (self.free)(self.ctx.as_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of each error is the one `NftLibrary` returned as a `String` before it had a
    /// type: a failed command's is libnftables' message alone (the network layer adds the rest).
    #[test]
    fn errors_read_as_before() {
        let cases = [
            (NftLibraryError::Nul, "the commands contain NUL"),
            (
                NftLibraryError::NewContext,
                "libnftables.so.1: nft_ctx_new failed",
            ),
            (
                NftLibraryError::Buffer,
                "libnftables.so.1: cannot buffer its output",
            ),
            (
                NftLibraryError::Command {
                    stderr: "Error: No such file or directory".into(),
                },
                "Error: No such file or directory",
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
        }
        // SAFETY: no library is at this path, so nothing is loaded and no initialiser runs.
        let missing = || unsafe { libloading::Library::new("/nonexistent/band.so") }.unwrap_err();
        let text = missing().to_string();
        let open = NftLibraryError::Open { source: missing() };
        assert_eq!(open.to_string(), format!("libnftables.so.1: {text}"));
        let name = "nft_ctx_new";
        let symbol = NftLibraryError::Symbol {
            name,
            source: missing(),
        };
        assert_eq!(
            symbol.to_string(),
            format!("libnftables.so.1: {name}: {text}")
        );
    }
}
