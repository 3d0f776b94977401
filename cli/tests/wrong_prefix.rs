//! An operator command pointed at tables that are not there (a wrong `--prefix`, a
//! Region or endpoint without the deployment) says which table is missing, the prefix
//! it tried, and what fixes it, in the operator's words: no store option names.

mod common;

use std::process::{Command, Output};

use common::{repo, stderr};
use stm_deploytest::stm_store::{CreateOptions, DynamoDbStore};

fn stm(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stm"));
    cmd.args(args)
        .current_dir(repo())
        .env_remove("STM_TABLE_PREFIX")
        .env_remove("STM_ENDPOINT_URL")
        .env("STM_EMULATOR", "1");
    cmd.output().expect("run stm")
}

#[test]
fn a_wrong_prefix_names_the_missing_table_and_the_fix() {
    // this process's own moto: the default prefix's tables in us-east-1 only
    let moto = stm_testkit::moto_blocking();
    let endpoint = moto.endpoint().to_string();
    tokio::runtime::Runtime::new()
        .expect("a runtime")
        .block_on(DynamoDbStore::create_with(
            Some(&endpoint),
            "us-east-1",
            CreateOptions {
                prefix: stm_deploytest::stm_store::DEFAULT_PREFIX.to_string(),
                ..CreateOptions::default()
            },
        ))
        .expect("the default prefix's tables");

    // a prefix with no tables, beside the default's: the right flag is offered
    for command in [["list"].as_slice(), ["show", "order-1"].as_slice()] {
        let mut args = command.to_vec();
        args.extend([
            "--endpoint",
            &endpoint,
            "--region",
            "us-east-1",
            "--prefix",
            "shop",
        ]);
        let out = stm(&args);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert_eq!(
            stderr(&out),
            format!(
                "error: no table shop_executions at {endpoint} (us-east-1): --prefix shop names no \
                 deployment there; the tables there have the prefix harel: pass `--prefix harel`\n"
            ),
            "{command:?}"
        );
    }

    // no tables at all in that Region: name the prefix, and how to get tables
    let out = stm(&[
        "list",
        "--endpoint",
        &endpoint,
        "--region",
        "eu-west-3",
        "--prefix",
        "shop",
    ]);
    assert_eq!(
        stderr(&out),
        format!(
            "error: no table shop_executions at {endpoint} (eu-west-3): --prefix shop names no deployment \
             there; pass the prefix the tables were made with (`--prefix`, or STM_TABLE_PREFIX), or start a \
             local deployment with `stm local`\n"
        )
    );
    // `-v` keeps the store's own words as the cause
    let out = stm(&[
        "list",
        "-v",
        "--endpoint",
        &endpoint,
        "--region",
        "eu-west-3",
        "--prefix",
        "shop",
    ]);
    assert!(
        stderr(&out).contains("\n  caused by: store backend error: table shop_executions does not exist"),
        "{}",
        stderr(&out)
    );
}

/// An endpoint on this machine where nothing listens (the local stack is not running, or
/// was started on another port): every command says so at once, in one line that names
/// the endpoint and how to start the stack, where it waited 9 s for the SDK's retries and
/// quoted a connection error.
#[test]
fn a_local_endpoint_with_nothing_listening_says_to_start_stm_local_at_once() {
    // a port that was free a moment ago: nothing listens there
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    for command in [["show", "order-1"].as_slice(), ["list"].as_slice()] {
        let mut args = command.to_vec();
        args.extend(["--endpoint", &endpoint]);
        let started = std::time::Instant::now();
        let out = stm(&args);
        let took = started.elapsed();
        assert_eq!(out.status.code(), Some(1), "{command:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out),
            format!(
                "error: nothing answers at {endpoint} (--endpoint, or STM_ENDPOINT_URL): start the local \
                 stack with `stm local` in another terminal and export the line it prints, or pass the \
                 endpoint that runs\n"
            ),
            "{command:?}"
        );
        assert!(
            took < std::time::Duration::from_secs(1),
            "{command:?} took {took:?}"
        );
    }
}
