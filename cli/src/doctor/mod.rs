//! `redlock doctor`: checks that the configured nodes keep the conditions under which a
//! lease is exclusive (`docs/guarantees.md`), and says for each one that does not which
//! condition fails and which simulator scenario shows the consequence.
//!
//! The work is split in three: [`collect`] talks to the nodes and records what it saw
//! ([`observe`]); [`rules`] turns those observations into [`finding`]s with pure functions
//! (tested without any server), gathered in a [`report`], which prints as a table or as JSON.
//! `docs/operations.md` explains every finding.
//!
//! | file | job |
//! |---|---|
//! | `collect.rs` | the only part that talks to the nodes |
//! | `observe.rs` | what was seen on each node, and the settings to judge it by |
//! | `clock.rs` | a node's clock from its `TIME` samples: offset, rate, steps, with error bounds |
//! | `permissions.rs` | the probe of the ACL, by doing what the library does |
//! | `rules/` | one function per check, from observations to findings |
//! | `finding.rs` | one finding: level, check, condition, scenario, remedy |
//! | `catalogue.rs` | the guarantee conditions and the simulator scenarios findings cite |
//! | `report/` | the report as data, and printed as a table or as JSON |

mod catalogue;
mod clock;
mod collect;
mod finding;
mod observe;
mod permissions;
mod report;
mod rules;

use std::time::Duration;

use redlock_core::{ConfigWarning, RestartPolicy};

use self::catalogue::Condition;
use self::collect::Target;
use self::observe::Limits;
use crate::args::DoctorArgs;
use crate::exit::Failure;
use crate::settings::Flags;
use crate::sources;

/// The clock window when `--clock-window` is not given.
pub(crate) const DEFAULT_CLOCK_WINDOW: Duration = Duration::from_secs(2);

/// The longest clock window accepted: the doctor is a check, not a monitor.
const MAX_CLOCK_WINDOW: Duration = Duration::from_secs(600);

/// Examines the nodes; returns 0 when every condition holds, 1 when one does not, 2 when
/// the fleet cannot be checked.
pub(crate) async fn doctor(args: DoctorArgs) -> Result<u8, Failure> {
    let flags = Flags {
        ttl: args.ttl,
        ..Flags::from_node_args(&args.nodes)
    };
    let settings = sources::from_sources(&args.nodes, flags)?;
    // Building the client checks every setting as `redlock run` would, and yields the
    // addresses without credentials that the report shows. Its warnings are findings of the
    // report (below), not lines on stderr.
    let redlock = settings.client_unannounced()?;
    let clock_window = args.clock_window.unwrap_or(DEFAULT_CLOCK_WINDOW);
    if clock_window > MAX_CLOCK_WINDOW {
        return Err(Failure::usage(format!(
            "--clock-window: at most {}",
            crate::duration::show(MAX_CLOCK_WINDOW)
        )));
    }
    let config = redlock.config();
    let limits = Limits {
        nodes: config.nodes(),
        quorum: config.quorum(),
        ttl: config.ttl(),
        node_timeout: config.node_timeout(),
        drift_factor: config.drift_factor().as_f64(),
        quarantine: match &settings.restart_quarantine {
            Some(setting) => setting.value.as_option(),
            None => RestartPolicy::default_for(config.ttl()).quarantine(),
        },
        clock_window,
        key_prefix: redlock.key_prefix().to_owned(),
    };
    let warnings: Vec<(Condition, String)> = config
        .validate()
        .unwrap_or_default()
        .into_iter()
        .map(|warning| {
            let condition = match warning {
                ConfigWarning::NoDrift => Condition::Clocks,
                _ => Condition::Availability,
            };
            (condition, warning.to_string())
        })
        .collect();
    let targets: Vec<Target> = settings
        .nodes
        .iter()
        .zip(redlock.node_addresses())
        .map(|(url, address)| Target {
            url: url.value.clone(),
            address: address.to_owned(),
        })
        .collect();

    let observations = collect::collect(&targets, &limits).await;
    let report = rules::judge(&limits, &observations, &warnings);
    if args.json {
        out!("{}", report::json::render(&report));
    } else {
        out_part!(
            "{}",
            report::table::render(&report, crate::wrap::width(std::io::stdout()))
        );
    }
    Ok(report.exit_code)
}
