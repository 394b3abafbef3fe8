//! `myriad-flood`: flood alone, with its flags at the top level. flood's child
//! processes can run from it (`--child-exe`), which is how the load crate's own tests
//! exercise child processes without the `myriad` binary. Users run `myriad flood`.

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "myriad-flood",
    about = "Open N push-server connections (same flags as `myriad flood`)"
)]
struct Cli {
    #[command(flatten)]
    flood: load::flood::FloodArgs,
}

fn main() {
    if let Err(e) = load::flood::run(Cli::parse().flood) {
        eprintln!("myriad-flood: {e:#}");
        std::process::exit(1);
    }
}
