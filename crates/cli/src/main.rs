//! `switchboard`: the headless coordination server and (later) agent subcommands.

mod serve;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "switchboard",
    version,
    about = "Self-hosted coordination service for AI agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the coordination server headless (no window).
    Serve(Box<serve::ServeArgs>),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(*args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchboard: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
