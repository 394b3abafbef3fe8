//! `myriad bench <scenario>` (SPEC G5): scenarios that start the servers they need
//! (`myriad serve` child processes), drive load with `flood` and `msggen`, record
//! CSVs, render plots, and write a Markdown report whose table holds the figures of
//! the SPEC's performance table next to their targets.
//!
//! Layout:
//! - this file: the scenario switch, `all`; [`args`]: the flags;
//! - [`context`]: the run's output directory, command line, machine facts, sysctls;
//! - [`report`]: the Markdown report (figure | measured | target | met?);
//! - [`held`]: a flood held in a thread with a live line per second, and the
//!   per-second server probe;
//! - [`peer`]: the servers broadcast, unicast, connect and rooms can run instead (Node.js, nchan, the C floor, Socket.IO);
//!   [`peer_pusher`]: the Pusher servers [`pusher`] runs instead (Sockudo, soketi);
//! - one file per scenario: [`idle`], [`broadcast`] (with [`ladder`], its rate steps),
//!   [`unicast`], [`connect`], [`rooms`] (many small channels, on the same ladder),
//!   [`presence`] (a channel's presence list asked on a large channel), [`pusher`]
//!   (Pusher clients on one channel, side by side with Sockudo and soketi), [`sprites`]
//!   (long-poll clients that each send with their own token, on a supervised server;
//!   with [`sprites_steps`], its throwing steps and ladder),
//!   [`disconnect`], [`churn`] (with [`soak`], the soak's readings and verdicts),
//!   [`keepalive`] (with [`keepalive_clients`]), [`c100k`], [`c1m`] (with [`c1m_graph`],
//!   [`c1m_setup`], [`c1m_watch`], [`c1m_report`], [`c1m_netns`], [`c1m_floor`]), [`abuse`] (with [`abuse_cases`], the hostile clients' child process).
//!
//! `--server-bin PATH` runs every scenario against another `myriad` executable (a
//! baseline build) with the same commands, so before/after figures come from one session.
//!
//! Not here: the load tools themselves (`load`), the server (`gateway`), the charts
//! (`viewer::plot`). Every scenario is bounded in connections and time, and ends
//! every process it started (the servers are killed on drop).

mod abuse;
mod abuse_cases;
mod args;
mod broadcast;
mod c100k;
mod c1m;
mod c1m_cost;
mod c1m_floor;
mod c1m_graph;
mod c1m_netns;
mod c1m_report;
mod c1m_setup;
mod c1m_watch;
mod churn;
mod churn_presence;
mod churn_watch;
mod connect;
mod context;
mod cpu_wait;
mod disconnect;
mod held;
mod history;
mod idle;
mod keepalive;
mod keepalive_clients;
mod ladder;
mod peer;
mod peer_pusher;
mod presence;
mod pusher;
mod report;
mod rooms;
mod soak;
mod sprites;
mod sprites_steps;
mod unicast;

pub use args::*;
pub(crate) use c1m_watch::alive;
pub use context::Ctx;
pub use report::Report;
/// `myriad bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(addr) = args.abusers_at {
        return abuse_cases::run_child(addr, &args.abuse_cases, args.abusers_ca.clone());
    }
    if let Some(peer) = args.peer {
        let rooms = matches!(peer, Peer::Nchan | Peer::Socketio);
        let others = matches!(peer, Peer::Node | Peer::Nchan | Peer::Floor);
        let pusher = matches!(peer, Peer::Sockudo | Peer::Soketi);
        anyhow::ensure!(
            match args.scenario {
                Scenario::Rooms => rooms,
                Scenario::Broadcast | Scenario::Unicast | Scenario::Connect => others,
                Scenario::Pusher => pusher,
                Scenario::C1m => peer == Peer::Floor,
                _ => false,
            },
            "--peer runs broadcast, unicast and connect (node, nchan, floor), rooms (nchan, \
             socketio), pusher (sockudo, soketi) and c1m (floor) only"
        );
    }
    if args.scenario == Scenario::C1m
        && c1m_netns::run_inside_if_needed(&args, 2 * args.connections())?
    {
        return Ok(());
    }
    let mut ctx = Ctx::new(&args)?;
    let scenarios: Vec<Scenario> = match args.scenario {
        Scenario::All => vec![
            Scenario::Idle,
            Scenario::Broadcast,
            Scenario::Unicast,
            Scenario::MassDisconnect,
            Scenario::Churn,
            Scenario::Keepalive,
        ],
        s => vec![s],
    };
    let mut done: Vec<(Scenario, Report)> = Vec::new();
    let mut failures = Vec::new();
    for s in scenarios {
        eprintln!("bench: ---- {} ----", name(s));
        let result = match s {
            Scenario::Idle => idle::run(&args, &mut ctx),
            Scenario::Broadcast => broadcast::run(&args, &mut ctx),
            Scenario::Unicast => unicast::run(&args, &mut ctx),
            Scenario::MassDisconnect => disconnect::run(&args, &mut ctx),
            Scenario::Churn => churn::run(&args, &mut ctx),
            Scenario::Keepalive => keepalive::run(&args, &mut ctx),
            Scenario::C100k => c100k::run(&args, &mut ctx),
            Scenario::C1m => c1m::run(&args, &mut ctx),
            Scenario::Connect => connect::run(&args, &mut ctx),
            Scenario::Abuse => abuse::run(&args, &mut ctx),
            Scenario::Rooms => rooms::run(&args, &mut ctx),
            Scenario::Presence => presence::run(&args, &mut ctx),
            Scenario::Pusher => pusher::run(&args, &mut ctx),
            Scenario::Sprites => sprites::run(&args, &mut ctx),
            Scenario::All => unreachable!("expanded above"),
        };
        match result {
            Ok(report) => {
                let path = report.write(&ctx)?;
                println!("{}", report.table_text());
                println!("Report: {}", path.display());
                done.push((s, report));
            }
            Err(e) if args.scenario == Scenario::All => {
                eprintln!("bench: {} failed: {e:#}", name(s));
                failures.push(format!("{}: {e:#}", name(s)));
            }
            Err(e) => return Err(e),
        }
    }
    if args.scenario == Scenario::All {
        let path = report::write_index(&ctx, &done, &failures)?;
        println!("Summary: {}", path.display());
    }
    anyhow::ensure!(failures.is_empty(), "{} scenario(s) failed", failures.len());
    Ok(())
}

/// The scenario's name as typed on the command line (also its directory).
pub fn name(s: Scenario) -> &'static str {
    match s {
        Scenario::Idle => "idle",
        Scenario::Broadcast => "broadcast",
        Scenario::Unicast => "unicast",
        Scenario::MassDisconnect => "mass-disconnect",
        Scenario::Churn => "churn",
        Scenario::Keepalive => "keepalive",
        Scenario::C100k => "c100k",
        Scenario::C1m => "c1m",
        Scenario::Connect => "connect",
        Scenario::Abuse => "abuse",
        Scenario::Rooms => "rooms",
        Scenario::Presence => "presence",
        Scenario::Pusher => "pusher",
        Scenario::Sprites => "sprites",
        Scenario::All => "all",
    }
}
