//! `cordon`: the runc-compatible command line. Parses, calls the library,
//! and turns errors into one line on stderr (and the last line of the log).

mod cli;

fn main() {
    let cli = cli::docs::parse();
    let process = cli::process_name(&cli);
    if cordon::sys::timings::init(process) {
        // From the time origin (or from the exec that started this copy
        // of the binary) until here: the exec and the dynamic linking.
        let (step, since) = match cordon::sys::timings::mark() {
            Some(t) if process == "supervise" => ("supervisor: exec", Some(t)),
            Some(t) => ("exec (sealed binary)", Some(t)),
            None => ("exec", None),
        };
        cordon::sys::timings::since(step, since);
    }
    // A command line tool dies quietly when its reader goes away
    // (`cordon state ID | head`). Not the supervisor: a container process
    // that dies mid-handshake must not take it down with SIGPIPE. Nor the
    // commands that run hooks: a hook that exits without reading the state
    // on its stdin is a broken pipe libcontainer expects to see as EPIPE.
    if !matches!(
        cli.cmd,
        Some(
            cli::Cmd::Supervise(_) | cli::Cmd::Create(_) | cli::Cmd::Start(_) | cli::Cmd::Run(_) | cli::Cmd::Delete(_)
        )
    ) {
        let _ = cordon::sys::process::default_disposition(nix::sys::signal::Signal::SIGPIPE);
    }
    // Before this process opens anything: an fd of its own must not land
    // in a gap of the range `--preserve-fds` hands to the container.
    let preserve_fds = match &cli.cmd {
        Some(cli::Cmd::Create(a)) => a.runc.preserve_fds,
        Some(cli::Cmd::Run(a)) => a.runc.preserve_fds,
        Some(cli::Cmd::Exec(a)) => a.preserve_fds,
        _ => 0,
    };
    if let Err(e) = cordon::container::check_preserved_fds(preserve_fds) {
        eprintln!("cordon: {e}");
        std::process::exit(1);
    }
    // CVE-2019-5736: a container process could reach the runtime's binary
    // through /proc/<pid>/exe of a process cordon forks into the container
    // (the init before it execs, an exec'd process) and overwrite it. The
    // commands that fork into containers re-exec from a copy of the binary
    // no container can write first, as runc and youki do.
    if matches!(
        cli.cmd,
        Some(cli::Cmd::Create(_) | cli::Cmd::Run(_) | cli::Cmd::Exec(_))
    ) {
        // The supervisor runs from the binary on disk (it is not reachable
        // from containers): remember where that is across the re-exec.
        if std::env::var_os(cordon::container::BINARY_ENV).is_none() {
            if let Ok(exe) = std::env::current_exe() {
                // Single-threaded at this point of main.
                let _ = cordon::sys::process::set_env_single_threaded(cordon::container::BINARY_ENV, exe);
            }
        }
        // A read-only overlayfs view of the binary (runc 1.2's way), or a
        // sealed memfd copy where overlayfs is unavailable.
        // The sealed copy times its own exec from here.
        cordon::sys::timings::set_mark();
        if let Err(e) = cordon::sys::exeseal::ensure_sealed(
            &cordon::layout::cordon_root(&cli.root).join(cordon::layout::SEALED_BINARY),
        ) {
            eprintln!("cordon: seal the runtime binary: {e}");
            std::process::exit(1);
        }
    }
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
