//! The command line, as clap parses it. Values are only parsed here; `settings` merges them
//! with the environment and the config file, and the library checks them.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueHint};

use crate::duration;
use crate::quarantine::{self, Quarantine};

const EXIT_CODES: &str = "\
Exit codes of `redlock run`:
  CMD's status   CMD ran to its end (128+N if a signal N killed it)
  64             bad arguments or configuration (or nodes that are not Redis servers)
  69             too few nodes answered, or were counted (the restart quarantine), for a quorum
  74             the lease was lost while CMD ran; CMD was sent SIGTERM, then SIGKILL
  75             another owner holds the resource (after --wait)
  77             the nodes refused this client (password, ACL)
  79             a process of CMD's group was out of reach of redlock's signals (it changed
                 its user) and may have run on after the lease ended
  126, 127       CMD could not be started, or was not found
Exit codes of `redlock status`: 0 held by a quorum, 1 not held, 69 too few nodes answered to tell.
Exit codes of `redlock doctor`: 0 every condition holds, 1 one does not, 2 the fleet cannot be
checked (fewer than a quorum of nodes answered).

Each setting comes from its flag, else its environment variable (REDLOCK_NODES with
comma-separated URLs, REDLOCK_TTL, …), else the config file, else its default. The config
file is --config, else REDLOCK_CONFIG, else the first that exists of
$XDG_CONFIG_HOME/redlock/redlock.toml (~/.config/…) and /etc/redlock/redlock.toml.
See docs/cli.md for the config file and more.";

/// Run a command only while holding a Redlock lease on independent Redis nodes (flock(1)
/// across servers), and show who holds a resource.
#[derive(Debug, Parser)]
#[command(name = "redlock", version, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run CMD while holding a lease on RESOURCE, keeping the lease extended; terminate CMD
    /// if the lease is lost; release it when CMD exits; exit with CMD's status.
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// Show each node's holder of RESOURCE, its remaining TTL and fence counter, and whether
    /// a quorum holds it (read-only). Each node gets the per-node timeout to answer and, when
    /// one is set (--node-timeout or the config file), as long to connect.
    Status(StatusArgs),
    /// Check that the nodes keep the conditions under which a lease is exclusive: reachability
    /// and round trips, role, duplicates, persistence, uptime against the restart quarantine,
    /// eviction, clock offset and rate, and the permissions the client needs.
    #[command(after_help = DOCTOR_HELP)]
    Doctor(DoctorArgs),
    /// Print a completion script for SHELL on stdout, e.g. `redlock completions bash >
    /// ~/.local/share/bash-completion/completions/redlock` (see docs/cli.md).
    Completions(CompletionsArgs),
    /// Print a man page (roff) on stdout: redlock(1), or redlock-COMMAND(1) for COMMAND,
    /// e.g. `redlock man run > ~/.local/share/man/man1/redlock-run.1`.
    Man(ManArgs),
}

const DOCTOR_HELP: &str = "\
Each finding names the guarantee condition it touches (docs/guarantees.md) and the simulator
scenario that shows what happens when it fails. The doctor takes, extends and releases leases
on a scratch resource (`<key prefix>doctor-<random>`) on each node, and deletes its keys.
Its user needs, besides the client's commands, PING, INFO, TIME and CONFIG GET.

Exit codes: 0 every condition holds, 1 one does not, 2 the fleet cannot be checked (fewer
than a quorum of nodes answered), 64 bad arguments or configuration.
See docs/operations.md for what each finding means.";

/// Where the nodes are and how to talk to them; shared by every command.
#[derive(Debug, Args)]
pub(crate) struct NodeArgs {
    /// A Redis node URL (redis://[:password@]host:port[/db]); repeat it, or separate URLs
    /// with commas. Overrides REDLOCK_NODES and the config file [env: REDLOCK_NODES].
    #[arg(long = "node", value_name = "URL", value_delimiter = ',')]
    pub(crate) nodes: Vec<String>,
    /// A TOML config file (nodes, ttl, key_prefix, …); flags and environment variables
    /// override it [env: REDLOCK_CONFIG] [default: $XDG_CONFIG_HOME/redlock/redlock.toml,
    /// else /etc/redlock/redlock.toml, the first that exists].
    // The hints let the shells' completions offer files, and commands for CMD.
    #[arg(long, value_name = "PATH", value_hint = ValueHint::FilePath)]
    pub(crate) config: Option<PathBuf>,
    /// The prefix of lock keys [env: REDLOCK_KEY_PREFIX] [default: redlock:].
    #[arg(long, value_name = "PREFIX")]
    pub(crate) key_prefix: Option<String>,
    /// How long to wait for one node's reply [env: REDLOCK_NODE_TIMEOUT] [default: 50ms, or
    /// ttl/20 when shorter].
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub(crate) node_timeout: Option<Duration>,
    /// How long after it started a node is left out of quorums when this process first meets
    /// it or sees it restart: it may have lost its keys. Must cover the longest TTL any client
    /// of these nodes uses; `off` declares that every node persists each write (appendfsync
    /// always) [env: REDLOCK_RESTART_QUARANTINE] [default: the ttl].
    #[arg(long, value_name = "DURATION|off", value_parser = quarantine::parse)]
    pub(crate) restart_quarantine: Option<Quarantine>,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) nodes: NodeArgs,
    /// The resource to lock, e.g. nightly-report.
    #[arg(long, short = 'r', value_name = "RESOURCE")]
    pub(crate) resource: String,
    /// The lease's time-to-live: how long the resource stays locked if redlock dies
    /// [env: REDLOCK_TTL] [default: 10s]. The lease is extended while CMD runs.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub(crate) ttl: Option<Duration>,
    /// Keep trying for this long while the resource is held elsewhere or nodes are
    /// unavailable [env: REDLOCK_WAIT] [default: 0s: one acquisition, up to 4 rounds in about
    /// half a second].
    #[arg(long, short = 'w', value_name = "DURATION", value_parser = duration::parse)]
    pub(crate) wait: Option<Duration>,
    /// The grace period between SIGTERM and SIGKILL when the lease is lost. SIGKILL goes to
    /// CMD's whole process group just before the lease's validity ends (at once if redlock
    /// notices late), and SIGTERM this long before that. At most a quarter of the ttl
    /// [env: REDLOCK_KILL_AFTER] [default: ttl/4, at most 10s].
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub(crate) kill_after: Option<Duration>,
    /// Stop extending after CMD has held the lease this long; CMD is then stopped before the
    /// lease runs out, as if it were lost [env: REDLOCK_MAX_HOLD] [default: 1h].
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub(crate) max_hold: Option<Duration>,
    /// Print nothing when another owner holds the resource (the exit code is still 75), nor
    /// when a --wait begins, so that cron mails only real problems.
    #[arg(long, short = 'q')]
    pub(crate) quiet: bool,
    /// Mint a fencing token on the nodes with the lease and pass it to CMD in the
    /// environment variable NAME, and the lease's owner token in NAME_OWNER (see
    /// docs/fencing.md).
    #[arg(long, value_name = "NAME")]
    pub(crate) fence_env: Option<String>,
    /// Let CMD gain privileges through setuid or file-capability programs (sudo, su).
    /// By default CMD runs with no new privileges (Linux: PR_SET_NO_NEW_PRIVS), because a
    /// process that switches users refuses redlock's signals and would run on after the
    /// lease ends; run `sudo redlock run …` instead of `redlock run -- sudo …`.
    #[arg(long)]
    pub(crate) allow_new_privileges: bool,
    /// Where to remember the servers met behind the nodes' names between runs, so that a
    /// node name that reaches another server (a promoted replica, a moved DNS name) is left
    /// out for the whole restart quarantine; `off` forgets them [env: REDLOCK_SERVERS_FILE]
    /// [default: $XDG_STATE_HOME/redlock/servers, else ~/.local/state/redlock/servers].
    #[arg(long, value_name = "PATH|off", value_hint = ValueHint::FilePath)]
    pub(crate) servers_file: Option<OsString>,
    /// Write the run's final report (exit code, outcome, resource, fencing token, rounds,
    /// time waited and held, the release) as one JSON document to PATH when redlock exits.
    /// PATH is created or emptied at the start; stdout and stderr are CMD's.
    #[arg(long, value_name = "PATH", value_hint = ValueHint::FilePath)]
    pub(crate) json: Option<PathBuf>,
    /// The command and its arguments, after `--`.
    #[arg(
        last = true,
        required = true,
        value_name = "CMD",
        value_hint = ValueHint::CommandWithArguments
    )]
    pub(crate) command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    #[command(flatten)]
    pub(crate) nodes: NodeArgs,
    /// The TTL of the leases taken on these nodes [env: REDLOCK_TTL] [default: 10s]: the
    /// round trips, the
    /// per-node timeout and the restart quarantine are judged against it.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub(crate) ttl: Option<Duration>,
    /// How long to watch each node's clock to measure its rate against this host's; the
    /// error bound shrinks as the window grows (0s measures the offset only) [default: 2s].
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub(crate) clock_window: Option<Duration>,
    /// Print the report as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub(crate) nodes: NodeArgs,
    /// The resource, e.g. nightly-report.
    pub(crate) resource: String,
    /// The TTL of the leases taken on these nodes, as `run --ttl` gives it: the default
    /// restart quarantine is the TTL, as for `run` [env: REDLOCK_TTL] [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub(crate) ttl: Option<Duration>,
    /// Print the answer as one JSON document.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    pub(crate) shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// The command whose page to print [default: redlock(1), the overview].
    #[arg(value_name = "COMMAND", value_parser = ["run", "status", "doctor", "completions", "man"])]
    pub(crate) command: Option<String>,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
