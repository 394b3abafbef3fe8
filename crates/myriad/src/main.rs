//! `myriad`: the one command-line tool (SPEC C6). Each subcommand's flags live next to
//! the code that runs it (`gateway`, `load`, `host`, `observe`, `viewer`, `store`); this
//! file only wires them together, sets up logging, and turns errors into a message and an
//! exit code.
//!
//! The words below are the project's one word per thing (`docs/glossary.md`); the
//! crates' own docs use them.
#![doc = include_str!("../../../docs/glossary.md")]

mod bench;
mod cli;
mod config_file;
mod demo;
mod presence_query;
mod serve;
mod server_process;
mod supervise;

fn main() {
    if let Err(err) = cli::main() {
        eprintln!("myriad: {err:#}");
        std::process::exit(1);
    }
}
