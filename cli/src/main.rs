//! The `lograil` binary: parses flags and calls into the library crates.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod admin_cli;
mod client_props;
mod console_cli;
mod demo;
mod dump_log;
mod serve;

#[derive(Debug, Parser)]
#[command(
    name = "lograil",
    version,
    about = "A Kafka-compatible partitioned log broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the broker (default: 127.0.0.1:9092, data in ./data).
    Serve(Box<serve::Args>),
    /// Create, list, describe and delete topics on a running broker.
    Topic {
        #[command(flatten)]
        connection: admin_cli::Connection,
        #[command(subcommand)]
        command: admin_cli::TopicCommand,
    },
    /// List and describe consumer groups (with lag in records and seconds), reset their offsets.
    Group {
        #[command(flatten)]
        connection: admin_cli::Connection,
        #[command(subcommand)]
        command: admin_cli::GroupCommand,
    },
    /// Write lines from stdin as records (Kafka's console producer), with lograil's client.
    Produce(Box<console_cli::ProduceArgs>),
    /// Print records (Kafka's console consumer), with lograil's client.
    Consume(Box<console_cli::ConsumeArgs>),
    /// List share groups (task queues) and describe one: members, configs, and per partition
    /// its records available, acquired and archived, and the age of its oldest record and lock.
    Queue {
        #[command(flatten)]
        connection: admin_cli::Connection,
        #[command(subcommand)]
        command: admin_cli::QueueCommand,
    },
    /// Dead-letter topics of a retry chain (lograil's retry-topic or Spring Kafka's): list,
    /// show and redrive their records; list the keys parked in the retry topics.
    Dlt {
        #[command(flatten)]
        connection: admin_cli::Connection,
        #[command(subcommand)]
        command: admin_cli::DltCommand,
    },
    /// Kafka's client quotas (producer_byte_rate, consumer_byte_rate, request_percentage) of
    /// users and client ids: set, remove, describe.
    Quota {
        #[command(flatten)]
        connection: admin_cli::Connection,
        #[command(subcommand)]
        command: admin_cli::QuotaCommand,
    },
    /// Print and check segment files, like Kafka's DumpLogSegments. Exits non-zero when it
    /// finds corruption.
    DumpLog(dump_log::Args),
    /// Play the webhook story: three tenants (one floods), a poison record, a downstream
    /// outage; the retry chain and the task queue's fair turns at work, live, then a summary,
    /// an HTML report and the commands to look further. On an embedded broker unless
    /// `--bootstrap-server` is given.
    Demo(Box<demo::Args>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo's own broker and clients would drown its table in their info lines, and the
    // chain's warnings (a dead letter, an outage) are what the table shows already.
    let default_filter = match cli.command {
        Command::Demo(_) => "warn,retry_topic=error",
        _ => "info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result = match cli.command {
        Command::Serve(args) => serve::run(&args).map(|()| ExitCode::SUCCESS),
        Command::DumpLog(args) => dump_log::run(&args),
        Command::Demo(args) => demo::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Produce(args) => console_cli::produce(&args).map(|()| ExitCode::SUCCESS),
        Command::Consume(args) => console_cli::consume(&args).map(|()| ExitCode::SUCCESS),
        Command::Topic {
            connection,
            command,
        } => admin_cli::topic(&connection, &command).map(|()| ExitCode::SUCCESS),
        Command::Group {
            connection,
            command,
        } => admin_cli::group(&connection, &command).map(|()| ExitCode::SUCCESS),
        Command::Queue {
            connection,
            command,
        } => admin_cli::queue(&connection, &command).map(|()| ExitCode::SUCCESS),
        Command::Dlt {
            connection,
            command,
        } => admin_cli::dlt(&connection, &command).map(|()| ExitCode::SUCCESS),
        Command::Quota {
            connection,
            command,
        } => admin_cli::quota(&connection, &command).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        // The reader of stdout went away (`lograil consume ... | head`): done, as for `cat`.
        Err(e) if broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
