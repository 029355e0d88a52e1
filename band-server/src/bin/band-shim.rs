//! `band-shim`: the program behind every command name in the sandbox. Its code is the `band-shim`
//! crate's (`band-shim/src/lib.rs`), which depends on nothing of band-server's: this executable
//! uses that crate alone, so it links only the shim's few dependencies, linked static
//! (`build.rs`). Use nothing else here.

fn main() {
    band_shim::main()
}
