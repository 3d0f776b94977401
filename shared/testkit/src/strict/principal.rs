//! Who a request acts as: the principals the layer serves, one port each, and the
//! template policy each is checked against.

/// Whose credentials a request carries: which port of the layer it was sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Principal {
    /// The test harness and the deployment tooling: no IAM check.
    Admin,
    /// The worker function's role (`WorkerRole`).
    Worker,
    /// The relay function's role (`RelayRole`).
    Relay,
    /// The sweeper function's role (`SweeperRole`).
    Sweeper,
    /// The operator CLI (`stm create/send/show/...`): the template's `OperatorPolicy`.
    Operator,
    /// `stm purge`: the template's `PurgePolicy`.
    Purger,
}

impl Principal {
    /// Every principal the layer serves.
    pub const ALL: [Principal; 6] = [
        Principal::Admin,
        Principal::Worker,
        Principal::Relay,
        Principal::Sweeper,
        Principal::Operator,
        Principal::Purger,
    ];

    /// The template resource whose policy applies (`None`: unchecked).
    pub fn policy(self) -> Option<&'static str> {
        match self {
            Principal::Admin => None,
            Principal::Worker => Some("WorkerRole"),
            Principal::Relay => Some("RelayRole"),
            Principal::Sweeper => Some("SweeperRole"),
            Principal::Operator => Some("OperatorPolicy"),
            Principal::Purger => Some("PurgePolicy"),
        }
    }

    /// The principal whose code calls itself `function` (`stm_aws::as_function`).
    pub fn of_function(function: &str) -> Option<Principal> {
        match function {
            "worker" => Some(Principal::Worker),
            "relay" => Some(Principal::Relay),
            "sweeper" => Some(Principal::Sweeper),
            "operator" => Some(Principal::Operator),
            "purger" => Some(Principal::Purger),
            _ => None,
        }
    }

    pub(super) fn arn(self) -> String {
        match self.policy() {
            Some(id) => format!("arn:aws:sts::123456789012:assumed-role/stm-{id}/{self:?}"),
            None => "arn:aws:iam::123456789012:user/admin".into(),
        }
    }
}
