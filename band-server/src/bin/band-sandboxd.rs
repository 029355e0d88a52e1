//! `band-sandboxd`: agent-sandbox's sandboxd contract served by band (`band_server::sandboxd`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(band_server::sandboxd::main(&args));
}
