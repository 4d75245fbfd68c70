//! The CPU benchmark's figures: per contender and task count, the client's and the nodes'
//! CPU per acquire + release (median and quartiles over the repetitions), their ratios to
//! the floors (each repetition's ratio, then the median), the rate (operations per second of
//! wall-clock time, and its ratio to the floors), and each command's calls per
//! operation and microseconds per call on the nodes, and the client's heap allocations per
//! operation. Printed, and written as JSON.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::Block;

/// Median and quartiles of `values`, interpolated.
fn spread(mut values: Vec<f64>) -> [f64; 3] {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let at = (values.len() - 1) as f64 * q;
        let (low, high) = (at.floor() as usize, at.ceil() as usize);
        values[low] + (values[high] - values[low]) * (at - low as f64)
    };
    [at(0.5), at(0.25), at(0.75)]
}

fn spread_json([median, q1, q3]: [f64; 3]) -> Value {
    json!({ "median": median, "q1": q1, "q3": q3 })
}

/// Client and servers' µs per operation of one block, and its rate (operations per second).
fn per_op(block: &Block, ops: usize) -> (f64, f64, f64) {
    let ops = ops as f64;
    (
        block.client.as_secs_f64() * 1e6 / ops,
        block.servers.cpu * 1e6 / ops,
        ops / block.wall.as_secs_f64(),
    )
}

/// Prints the results and writes them to `target/criterion/cpu/cpu.json`.
pub(crate) fn write(
    results: &BTreeMap<usize, BTreeMap<String, Vec<Block>>>,
    ops: usize,
    nodes: usize,
) {
    let mut out = serde_json::Map::new();
    for (tasks, contenders) in results {
        let reps = contenders.values().map(Vec::len).min().unwrap_or(0);
        println!("\n{tasks} task(s), N = {nodes}, {reps} repetitions of {ops} acquire + release:");
        println!(
            "{:<24} {:>22} {:>9} {:>9} {:>9} {:>22} {:>9} {:>9} {:>9}",
            "contender",
            "client µs/op",
            "÷all",
            "÷quorum",
            "÷piped",
            "servers µs/op",
            "÷all",
            "÷quorum",
            "k ops/s ÷all"
        );
        let mut entry = serde_json::Map::new();
        for (name, blocks) in contenders {
            let costs: Vec<(f64, f64, f64)> = blocks.iter().map(|b| per_op(b, ops)).collect();
            let client = spread(costs.iter().map(|c| c.0).collect());
            let servers = spread(costs.iter().map(|c| c.1).collect());
            let rate = spread(costs.iter().map(|c| c.2).collect());
            let allocations = spread(
                blocks
                    .iter()
                    .map(|b| b.allocations as f64 / ops as f64)
                    .collect(),
            );
            // A floor left out (`CPU_ONLY`) gives no ratio.
            let ratio = |floor: &str, side: fn(&(f64, f64, f64)) -> f64| {
                let Some(floor) = contenders.get(floor) else {
                    return [f64::NAN; 3];
                };
                let floor: Vec<(f64, f64, f64)> = floor.iter().map(|b| per_op(b, ops)).collect();
                spread(
                    costs
                        .iter()
                        .zip(&floor)
                        .map(|(c, f)| side(c) / side(f))
                        .collect(),
                )
            };
            let client_all = ratio("floor_all", |c| c.0);
            let client_quorum = ratio("floor_quorum", |c| c.0);
            let servers_all = ratio("floor_all", |c| c.1);
            let servers_quorum = ratio("floor_quorum", |c| c.1);
            let client_pipelined = ratio("floor_pipelined", |c| c.0);
            let servers_pipelined = ratio("floor_pipelined", |c| c.1);
            let rate_all = ratio("floor_all", |c| c.2);
            let rate_pipelined = ratio("floor_pipelined", |c| c.2);
            println!(
                "{name:<24} {:>7.1} ({:>5.1}–{:>5.1}) {:>9.2} {:>9.2} {:>9.2} {:>7.1} ({:>5.1}–{:>5.1}) {:>9.2} {:>9.2} {:>5.1} {:>5.2}",
                client[0],
                client[1],
                client[2],
                client_all[0],
                client_quorum[0],
                client_pipelined[0],
                servers[0],
                servers[1],
                servers[2],
                servers_all[0],
                servers_quorum[0],
                rate[0] / 1e3,
                rate_all[0],
            );
            // Each command over every repetition: calls per operation, µs per call.
            let mut commands: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
            for block in blocks {
                for (command, cost) in &block.servers.commands {
                    let total = commands.entry(command).or_default();
                    total.0 += cost.calls;
                    total.1 += cost.usec;
                }
            }
            let all_ops = (ops * blocks.len()) as f64;
            let mut line = Vec::new();
            let mut commands_json = serde_json::Map::new();
            for (command, (calls, usec)) in &commands {
                let per_op = *calls as f64 / all_ops;
                let per_call = *usec as f64 / (*calls).max(1) as f64;
                // The readings themselves (INFO, DBSIZE) are a handful per block.
                if per_op >= 0.01 {
                    line.push(format!("{command} {per_op:.2}/op {per_call:.2} µs"));
                }
                commands_json.insert(
                    (*command).to_owned(),
                    json!({ "calls_per_op": per_op, "usec_per_call": per_call }),
                );
            }
            println!(
                "{:<24} {} allocations/op on the client; {}",
                "",
                allocations[0].round(),
                line.join(", ")
            );
            entry.insert(
                name.clone(),
                json!({
                    "client_us": spread_json(client),
                    "servers_us": spread_json(servers),
                    "client_allocations_per_op": spread_json(allocations),
                    "client_over_floor_all": spread_json(client_all),
                    "client_over_floor_quorum": spread_json(client_quorum),
                    "servers_over_floor_all": spread_json(servers_all),
                    "servers_over_floor_quorum": spread_json(servers_quorum),
                    "client_over_floor_pipelined": spread_json(client_pipelined),
                    "servers_over_floor_pipelined": spread_json(servers_pipelined),
                    "rate_per_s": spread_json(rate),
                    "rate_over_floor_all": spread_json(rate_all),
                    "rate_over_floor_pipelined": spread_json(rate_pipelined),
                    "commands": commands_json,
                    "repetitions": blocks.len(),
                }),
            );
        }
        out.insert(format!("tasks_{tasks}"), Value::Object(entry));
    }
    let dir = redlock_tests::target_dir().join("criterion").join("cpu");
    std::fs::create_dir_all(&dir).expect("create the output directory");
    let file = dir.join("cpu.json");
    let text = serde_json::to_string_pretty(&Value::Object(out)).expect("JSON");
    std::fs::write(&file, text).expect("write the results");
    println!("\nwrote {}", file.display());
}
