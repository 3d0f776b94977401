//! `stm purge` against `stm local` on moto, through the strict layer under the template's
//! PurgePolicy: harel's flags, report lines and exit codes, the archive file, bad input.

mod common;

use common::{stderr, stdout, Local};

#[test]
fn purge_reports_archives_and_deletes_like_harel() {
    let local = Local::start("purge-cli");
    // o-1 DONE, o-2 CANCELLED, o-3 still running
    for id in ["o-1", "o-2", "o-3"] {
        local.ok(&["create", "examples/order.stm", "Order", "--id", id]);
        local.wait_show(id, &["at Draft"]);
    }
    local.ok(&["send", "o-1", r#"Submit:{"amount": 42.5}"#]);
    local.ok(&["send", "o-1", r#"PaymentOk:{"receipt": "r-1"}"#]);
    local.ok(&["send", "o-1", "Shipped"]);
    local.wait_show("o-1", &["DONE"]);
    // with a retention, what the operator finishes carries DynamoDB's ttl
    local.ok(&["terminate", "o-2", "--finished-ttl-days", "7"]);
    local.wait_show("o-2", &["CANCELLED"]);
    let env = |name: &str| {
        local
            .env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .expect(name)
    };
    let script = r#"
import boto3, json, sys
db = boto3.client("dynamodb", endpoint_url=sys.argv[1], region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
for id in ("o-1", "o-2"):
    item = db.get_item(TableName=sys.argv[2] + "_executions", Key={"id": {"S": id}}, ConsistentRead=True)["Item"]
    data = json.loads(item["data"]["S"])
    print(id, data["status"], item["ttl"]["N"] if "ttl" in item else None, data["finished_at"])
"#;
    let out = std::process::Command::new(stm_testkit::python())
        .args(["-c", script, &env("STM_ENDPOINT_URL"), &env("STM_TABLE_PREFIX")])
        .output()
        .expect("python");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(
        &lines[0][..3],
        ["o-1", "DONE", "None"],
        "the worker here runs without a retention: {text}"
    );
    assert_eq!(&lines[1][..2], ["o-2", "CANCELLED"], "{text}");
    let ttl: f64 = lines[1][2].parse().expect("a ttl");
    let finished: f64 = lines[1][3].parse().expect("finished_at");
    assert_eq!(ttl, (finished + 7.0 * 86_400.0).floor(), "{text}");

    assert_eq!(
        local.ok(&["purge", "--older-than", "30d"]),
        "purged: 0\n",
        "nothing is that old"
    );
    assert_eq!(
        local.ok(&["purge", "--older-than", "0", "--dry-run", "-v"]),
        "would purge: 2\n  o-1\n  o-2\n"
    );
    local.wait_show("o-1", &["DONE"]);

    let dir = std::env::temp_dir().join(format!("stm-purge-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let archive = dir.join("purged.jsonl");
    let _ = std::fs::remove_file(&archive);
    let archive_arg = archive.to_str().expect("utf-8 path");
    let out = local.ok(&[
        "purge",
        "--older-than",
        "0s",
        "--status",
        "done",
        "--archive",
        archive_arg,
        "-v",
    ]);
    assert_eq!(out, "purged: 1\n  o-1\n");
    let line = std::fs::read_to_string(&archive).expect("archive written");
    assert_eq!(line.lines().count(), 1);
    assert!(line.starts_with(r#"{"root_id":"o-1","executions":[{"#), "{line}");
    let shown = local.stm(&["show", "o-1"]);
    assert!(
        !shown.status.success() && stderr(&shown).contains("no execution \"o-1\""),
        "{}",
        stderr(&shown)
    );
    local.wait_show("o-2", &["CANCELLED"]);
    local.wait_show("o-3", &["RUNNING"]);

    // bad input: one clear line, a failing exit, nothing deleted
    for (args, needle) in [
        (
            vec!["purge", "--older-than", "soon"],
            "invalid age 'soon' (e.g. 30d, 12h, 90m, 45s)",
        ),
        (
            vec!["purge", "--older-than", "1d", "--status", "failed"],
            "invalid value 'failed'",
        ),
        (
            vec!["purge", "--older-than", "0", "--limit", "0"],
            "--limit must be at least 1",
        ),
        (
            vec![
                "purge",
                "--older-than",
                "0",
                "--archive",
                "/nonexistent-dir/purged.jsonl",
            ],
            "cannot write the archive /nonexistent-dir/purged.jsonl",
        ),
    ] {
        let out = local.stm(&args);
        assert!(!out.status.success(), "{args:?} succeeded: {}", stdout(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    }
    local.wait_show("o-2", &["CANCELLED"]);

    // on a terminal, a progress line (redrawn in place, then cleared) goes to stderr
    let command = format!("{} purge --older-than 0 --dry-run", env!("CARGO_BIN_EXE_stm"));
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .envs(local.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(common::repo())
        .output()
        .expect("script (util-linux) runs stm on a pseudo-terminal");
    let shown = stdout(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("\rwould purge 1 trees; 1 finished roots examined")
            && shown.contains("would purge: 1"),
        "{shown:?}"
    );

    assert_eq!(
        local.ok(&["purge", "--older-than", "0", "--limit", "5"]),
        "purged: 1\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
