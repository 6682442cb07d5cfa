//! Unit tests of the life cycle helpers.

use super::*;

/// The typed errors print the one-line messages users saw when they
/// were strings.
#[test]
fn typed_errors_print_the_messages_users_know() {
    let cases: Vec<(Error, &str)> = vec![
        (
            Error::PreservedFdClosed { n: 2, fd: 4, last: 4 },
            "--preserve-fds 2: fd 4 is not open (fds 3 to 4 are passed to the container)",
        ),
        (Error::NoCommand, "exec: no command given"),
        (
            Error::CallsInSupervisor {
                source: Box::new(Error::NotFound("c".into())),
                calls: 2,
            },
            "container \"c\" does not exist: 2 call(s) of the container wait in its supervisor (an open of a \
             FIFO, a blocking connect) and cannot be frozen until they return",
        ),
        (
            Error::HostRulesNeedNetns {
                policy: "p".into(),
                at: 1,
            },
            "policy p: net[1].host needs the container in a network namespace of its own (linux.namespaces has \
             no \"network\": it shares the host's network, where cordon cannot answer its lookups)",
        ),
        (
            Error::Supervisor {
                id: "c".into(),
                reason: SupervisorStart::Log("cordon: policy x: not found".into()),
            },
            "supervisor for \"c\" failed to start: cordon: policy x: not found",
        ),
        (
            Error::Cgroup {
                what: "update \"c\"".into(),
                source: Box::new(std::io::Error::from_raw_os_error(libc::ENOENT)),
            },
            "update \"c\": No such file or directory (os error 2)",
        ),
    ];
    for (e, want) in cases {
        assert_eq!(chain(&e), want);
    }
}
