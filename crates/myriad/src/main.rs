//! `myriad`: the one command-line tool (SPEC C6). Each subcommand's flags live next to
//! the code that runs it (`gateway`, `load`, `host`, `observe`, `viewer`, `store`); this
//! file only wires them together, sets up logging, and turns errors into a message and an
//! exit code.

mod bench;
mod cli;
mod config_file;
mod demo;
mod serve;
mod server_process;
mod supervise;

fn main() {
    if let Err(err) = cli::main() {
        eprintln!("myriad: {err:#}");
        std::process::exit(1);
    }
}
