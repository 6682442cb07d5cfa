//! `cordon`: the runc-compatible command line. Parses, calls the library,
//! and turns errors into one line on stderr (and the last line of the log).

mod cli;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    let format = if cli.log_format == "json" {
        cli::logging::Format::Json
    } else {
        cli::logging::Format::Text
    };
    if let Err(e) = cli::logging::init(cli.log.as_deref(), format, cli.debug) {
        eprintln!(
            "cordon: --log {}: {e}",
            cli.log.as_deref().map(|p| p.display().to_string()).unwrap_or_default()
        );
        std::process::exit(1);
    }
    match cli::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            let msg = cordon::container::chain(e.as_ref());
            cli::logging::final_error(&msg);
            eprintln!("cordon: {msg}");
            std::process::exit(1);
        }
    }
}
