//! `lograil-bench`: throughput and latency of any Kafka-compatible broker. Parses the flags and
//! hands over to the `lograil_benches` library; see `lograil-bench --help`.

use std::process::ExitCode;

use clap::Parser;
use lograil_benches::args::{Cli, Command};
use lograil_benches::report::write_json;
use lograil_benches::run::{run, Mode};
use lograil_benches::{limits, noisy, plot, queue, report::RunReport, share_spike, spike};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match execute(cli.command) {
        Ok(complete) => {
            if complete {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs a mode, prints its report and writes the JSON; `Ok(false)` if the run was incomplete
/// (timed out or lost records).
fn execute(command: Command) -> anyhow::Result<bool> {
    let (mode, args) = match command {
        Command::Limits(args) => {
            let report = limits::run(&args)?;
            print!("{}", report.human());
            if let Some(path) = &args.json {
                write_json(path, &report)?;
            }
            return Ok(true);
        }
        Command::Queue(args) => {
            let report = queue::run(&args)?;
            print!("{}", report.human());
            if let Some(path) = &args.json {
                write_json(
                    path,
                    &serde_json::json!({ "args": args, "results": report }),
                )?;
            }
            return Ok(true);
        }
        Command::Spike(args) => {
            let report = spike::run(&args)?;
            print!("{}", report.human());
            if let Some(path) = &args.json {
                write_json(path, &report)?;
            }
            return Ok(true);
        }
        Command::Noisy(args) => {
            let report = noisy::run(&args)?;
            print!("{}", report.human());
            if let Some(path) = &args.json {
                write_json(path, &report)?;
            }
            if let Some(path) = &args.plot {
                noisy::write_svg(path, &report)?;
            }
            return Ok(true);
        }
        Command::ShareSpike(args) => {
            let report = share_spike::run(&args)?;
            print!("{}", report.human());
            if let Some(path) = &args.spike.json {
                write_json(path, &report)?;
            }
            return Ok(true);
        }
        Command::SpikePlot(args) => {
            spike::plot(&args)?;
            return Ok(true);
        }
        Command::Produce(args) => (Mode::Produce, args),
        Command::Consume(args) => (Mode::Consume, args),
        Command::EndToEnd(args) => (Mode::EndToEnd, args),
    };
    let report = run(mode, &args)?;
    print!("{}", report.human());
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    if let (Some(path), Some(produce)) = (&args.latency_file, &report.produce) {
        produce.write_samples(path)?;
    }
    if let Some(path) = &args.plot {
        plot::write_svg(path, &report)?;
    }
    Ok(complete(&report))
}

fn complete(report: &RunReport) -> bool {
    let produced_ok = report
        .produce
        .as_ref()
        .is_none_or(|p| !p.timed_out && p.records_failed == 0);
    let consumed_ok = report.consume.as_ref().is_none_or(|c| !c.timed_out);
    produced_ok && consumed_ok
}
