//! An endpoint override alone never swaps in the emulator's dummy credentials: real
//! endpoints (a VPC endpoint through `AWS_ENDPOINT_URL`) need the real ones. Only the
//! explicit switch, `STM_EMULATOR=1`, does. One test in its own binary, since it sets the
//! process environment.

use aws_credential_types::provider::ProvideCredentials;

async fn access_key(endpoint: Option<&str>) -> String {
    let config = stm_aws::sdk_config(endpoint, "us-east-1").await;
    let provider = config.credentials_provider().expect("a credentials provider");
    provider
        .provide_credentials()
        .await
        .expect("credentials")
        .access_key_id()
        .to_string()
}

#[tokio::test]
async fn dummy_credentials_only_under_the_emulator_switch() {
    std::env::set_var("AWS_ACCESS_KEY_ID", "AKIAREALKEYFROMENV00");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "real-secret");
    std::env::remove_var("STM_EMULATOR");
    std::env::remove_var("AWS_PROFILE");
    let vpc = Some("https://vpce-0123-abcd.dynamodb.us-east-1.vpce.amazonaws.com");
    assert_eq!(
        access_key(vpc).await,
        "AKIAREALKEYFROMENV00",
        "an endpoint keeps the real credentials"
    );
    assert_eq!(access_key(None).await, "AKIAREALKEYFROMENV00");
    assert!(!stm_aws::emulator_mode());

    std::env::set_var("STM_EMULATOR", "1");
    assert!(stm_aws::emulator_mode());
    assert_eq!(
        access_key(Some("http://127.0.0.1:5000")).await,
        "test",
        "the emulator's dummy credentials"
    );
    std::env::set_var("STM_EMULATOR", "0");
    assert!(!stm_aws::emulator_mode());
}
