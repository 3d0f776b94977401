//! Remote actions: off by default, and with the parameters set, least privilege.

use serde_json::{json, Value};
use stm_deploytest::template::{Resolver, Template};

/// Remote actions are off by default (no `STM_ACTIONS`, no Lambda grant); with the
/// parameters set, the worker gets the bindings and may invoke exactly the listed ARNs.
#[test]
fn remote_actions_are_opt_in_and_least_privilege() {
    let t = Template::repo();
    let off = Resolver::new(&t, &[])
        .with_ref("EventQueue", "q")
        .with_ref("TimerQueue", "t")
        .environment("Worker")
        .expect("environment");
    assert!(!off.contains_key("STM_ACTIONS"), "{off:?}");
    let on = Resolver::new(
        &t,
        &[
            ("RemoteActions", "charge=lambda:charge-fn"),
            (
                "RemoteActionFunctionArns",
                "arn:aws:lambda:us-east-1:123456789012:function:charge-fn",
            ),
        ],
    )
    .with_ref("EventQueue", "q")
    .with_ref("TimerQueue", "t")
    .environment("Worker")
    .expect("environment");
    assert_eq!(
        on.get("STM_ACTIONS").map(String::as_str),
        Some("charge=lambda:charge-fn")
    );
    for function in ["Relay", "Sweeper"] {
        let env = Resolver::new(&t, &[("RemoteActions", "x=lambda:y")])
            .with_ref("EventQueue", "q")
            .with_ref("TimerQueue", "t")
            .environment(function)
            .expect("environment");
        assert!(!env.contains_key("STM_ACTIONS"), "{function}: {env:?}");
    }

    // the grant: conditional, Allow lambda:InvokeFunction on the parameter's ARNs only
    let statements = &t.properties("WorkerRole").expect("role")["Policies"][0]["PolicyDocument"]["Statement"];
    let conditional: Vec<&Value> = statements
        .as_array()
        .expect("statements")
        .iter()
        .filter_map(|s| s.get("Fn::If"))
        .filter(|args| args[0] != "TracesToXRay")
        .collect();
    assert_eq!(conditional.len(), 1, "one conditional statement besides X-Ray's");
    let args = conditional[0];
    assert_eq!(args[0], json!("InvokesRemoteFunctions"));
    assert_eq!(args[1]["Action"], json!(["lambda:InvokeFunction"]));
    assert_eq!(args[1]["Resource"], json!({"Ref": "RemoteActionFunctionArns"}));
    assert_eq!(args[2], json!({"Ref": "AWS::NoValue"}));
    // and no other role can invoke anything
    for role in ["RelayRole", "SweeperRole"] {
        let text = t.properties(role).expect("role").to_string();
        assert!(!text.contains("lambda:"), "{role} grants a Lambda action");
    }
}
