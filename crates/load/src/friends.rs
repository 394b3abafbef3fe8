//! `myriad friends`: the social graph tools (SPEC G3, B4).
//!
//! - [`gen`]: a Barabási–Albert graph (preferential attachment), deterministic for
//!   a seed, written as an igraph edge list (`A B` per line).
//! - [`load`]: reads such a list into a subscription store (mutual friendships by
//!   default, one-way follows with `--directed`), reporting bad lines by number.
//!
//! Not here: the in-memory index (`router`) and the store backends (`store`).

mod generate;
mod ingest;
mod rng;

pub use generate::{barabasi_albert, gen, GenArgs};
pub use ingest::{load, load_with_summary, parse_edge_line, BadLinePolicy, LoadArgs, LoadSummary};
pub use rng::Rng;

/// `myriad friends <command>`.
#[derive(clap::Args, Debug)]
pub struct FriendsArgs {
    #[command(subcommand)]
    pub command: FriendsCommand,
}

/// The friends subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum FriendsCommand {
    /// Generate a Barabási–Albert friends graph as an `A B` edge list.
    Gen(GenArgs),
    /// Load an `A B` edge list into the subscription store.
    Load(LoadArgs),
}

/// Runs `myriad friends ...`.
pub fn run(args: FriendsArgs) -> anyhow::Result<()> {
    match args.command {
        FriendsCommand::Gen(a) => gen(a),
        FriendsCommand::Load(a) => load(a),
    }
}
