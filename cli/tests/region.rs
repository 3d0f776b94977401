//! The operator commands find their Region as the AWS CLI does: `--region`, else
//! `AWS_REGION`, else `AWS_DEFAULT_REGION`, else the `region` of the profile (`--profile`,
//! else `AWS_PROFILE`) in the shared config file; `us-east-1` only with a local endpoint,
//! and real AWS without a Region is refused before any request. moto keeps each Region's
//! tables apart, so a command that took the wrong Region finds no tables.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{repo, stderr};
use stm_deploytest::stm_store::{CreateOptions, DynamoDbStore};

/// What the AWS tools read a Region or a profile from; each case sets its own.
const AWS_VARIABLES: [&str; 6] = [
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "STM_ENDPOINT_URL",
];

/// `stm ARGS` with only `vars` of the AWS ones, the config files those name (or empty
/// ones: never the machine's own `~/.aws`).
fn stm<S: AsRef<std::ffi::OsStr>>(dir: &Path, vars: &[(&str, &str)], args: &[S]) -> Output {
    let empty = dir.join("empty");
    std::fs::write(&empty, "").expect("an empty config file");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stm"));
    cmd.args(args).current_dir(repo());
    for var in AWS_VARIABLES {
        cmd.env_remove(var);
    }
    // a temp dir of its own: another test's `stm local` (its lock file) would add its
    // export line to the errors read here
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).expect("a temp dir");
    cmd.env("AWS_CONFIG_FILE", &empty)
        .env("AWS_SHARED_CREDENTIALS_FILE", &empty)
        .env("TMPDIR", &tmp)
        .env("STM_EMULATOR", "1");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().expect("run stm")
}

#[test]
fn the_region_comes_from_the_flag_the_environment_or_the_profile() {
    let moto = stm_testkit::moto_blocking();
    let endpoint = moto.endpoint().to_string();
    let prefix = stm_testkit::unique_prefix("region");
    // the tables, in ap-south-1 only
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime
        .block_on(DynamoDbStore::create_with(
            Some(&endpoint),
            "ap-south-1",
            CreateOptions {
                prefix: prefix.clone(),
                ..CreateOptions::default()
            },
        ))
        .expect("tables in ap-south-1");
    let dir = std::env::temp_dir().join(format!("stm-region-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("config");
    std::fs::write(
        &config,
        "[default]\nregion = eu-west-3\n\n[profile ops]\nregion = ap-south-1\n",
    )
    .expect("a config file");
    let config = config.to_str().expect("a UTF-8 path");
    let list = ["list", "--endpoint", &endpoint, "--prefix", &prefix];
    let with =
        |extra: &[&'static str]| -> Vec<String> { list.iter().chain(extra).map(|s| s.to_string()).collect() };

    let found = |what: &str, out: Output| {
        assert!(
            out.status.success(),
            "{what}: the tables in ap-south-1 not found: {}",
            stderr(&out)
        );
    };
    found("--region", stm(&dir, &[], &with(&["--region", "ap-south-1"])));
    found("AWS_REGION", stm(&dir, &[("AWS_REGION", "ap-south-1")], &list));
    found(
        "AWS_DEFAULT_REGION",
        stm(&dir, &[("AWS_DEFAULT_REGION", "ap-south-1")], &list),
    );
    found(
        "--profile ops in the config file",
        stm(&dir, &[("AWS_CONFIG_FILE", config)], &with(&["--profile", "ops"])),
    );
    found(
        "AWS_PROFILE=ops",
        stm(
            &dir,
            &[("AWS_CONFIG_FILE", config), ("AWS_PROFILE", "ops")],
            &list,
        ),
    );
    // the flag wins over the environment, the environment over the profile
    found(
        "--region over AWS_REGION",
        stm(
            &dir,
            &[("AWS_REGION", "eu-west-3")],
            &with(&["--region", "ap-south-1"]),
        ),
    );

    let elsewhere = |what: &str, region: &str, out: Output| {
        let err = stderr(&out);
        assert!(!out.status.success(), "{what}: found tables that are not there");
        assert!(
            err.contains(&format!("no table {prefix}_executions at {endpoint} ({region})")),
            "{what}: the error names the Region it took ({region}): {err}"
        );
    };
    elsewhere(
        "the default profile",
        "eu-west-3",
        stm(&dir, &[("AWS_CONFIG_FILE", config)], &list),
    );
    elsewhere(
        "AWS_REGION over the profile",
        "eu-west-3",
        stm(
            &dir,
            &[
                ("AWS_CONFIG_FILE", config),
                ("AWS_PROFILE", "ops"),
                ("AWS_REGION", "eu-west-3"),
            ],
            &list,
        ),
    );
    // nothing says a Region: us-east-1, for an emulator only
    elsewhere("no Region, an emulator", "us-east-1", stm(&dir, &[], &list));

    // real AWS (no endpoint) and no Region: refused before any request, saying how
    let out = stm(&dir, &[], &["list", "--prefix", &prefix]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "a usage error: {err}");
    assert!(
        err.contains("no AWS Region: pass --region REGION, set AWS_REGION") && err.lines().count() == 1,
        "{err}"
    );
    let out = stm(&dir, &[], &["list", "--prefix", &prefix, "--profile", "ops"]);
    assert!(
        stderr(&out).contains("aws configure set region REGION --profile ops"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
