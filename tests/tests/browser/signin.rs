//! Desktop sign-in in the browser (issue 15): the app (the SDK's `SignIn`, the
//! desktop's own sign-in code) opens the authorization URL; the browser has no
//! console session, so the console asks for the operator token first, then shows
//! the consent page naming the app and the loopback address it listens on; the
//! operator allows; the browser lands on the app's loopback page, the app redeems
//! the code (PKCE) and mints the one-time console link the desktop window opens.
//! A second sign-in is denied on the page, and the app is told so.

use std::time::Duration;

use switchboard_tests::sdk::login::MemoryRefreshStore;
use switchboard_tests::sdk::reqwest;
use switchboard_tests::sdk::signin::SignIn;
use switchboard_tests::sdk::{Client, Error};

use crate::driver::Browser;
use crate::support::{console_and_browser, console_server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_desktop_signs_in_through_the_browser_with_the_operators_consent() {
    let Some(dist) = console_and_browser() else {
        return;
    };
    let server = console_server(dist).await;
    let signin = SignIn::start(&server.url, "switchboard-desktop", None)
        .await
        .unwrap();
    let authorize = signin.authorize_url().to_string();
    let listener = signin
        .redirect_uri()
        .trim_start_matches("http://")
        .trim_end_matches("/callback")
        .to_owned();
    let finish = tokio::spawn(async move { signin.finish(&reqwest::Client::new()).await });

    let browser = Browser::start().await;
    browser.open_console(&authorize).await;
    // No session yet: the console's login first, then the consent page.
    browser.find("#login").await;
    browser
        .type_into("#login-token", &server.operator_token)
        .await;
    browser.click("#login-submit").await;
    browser
        .wait_text("#authorize-client", "the app's name", |t| {
            t == "switchboard-desktop"
        })
        .await;
    assert_eq!(browser.text("#authorize-listener").await, listener);
    browser
        .wait_count("#authorize-scopes li[data-scope]", 2)
        .await;
    browser.click("#authorize-allow").await;
    // The browser is handed to the app's loopback page.
    browser
        .wait_text("#signin-result", "the app's answer", |t| {
            t.contains("Signed in")
        })
        .await;
    let signed_in = tokio::time::timeout(Duration::from_secs(20), finish)
        .await
        .expect("the app finished")
        .unwrap()
        .expect("signed in");
    assert_eq!(signed_in.scope, "ops:read ops:write");

    // As the desktop window: the one-time link the app mints opens the console.
    let store = std::sync::Arc::new(MemoryRefreshStore::new(signed_in.refresh_token));
    let client = Client::builder()
        .build_with_login(&server.url, store)
        .unwrap();
    let link = client.login_link(false).await.unwrap();
    browser
        .open_console(&format!("{}{}", server.url, link.path))
        .await;
    browser.find("#overview").await;

    // A second sign-in, denied on the consent page (the session exists now).
    let again = SignIn::start(&server.url, "switchboard-desktop", None)
        .await
        .unwrap();
    let authorize = again.authorize_url().to_string();
    let finish = tokio::spawn(async move { again.finish(&reqwest::Client::new()).await });
    browser.open_console(&authorize).await;
    browser.click("#authorize-deny").await;
    browser
        .wait_text("#signin-result", "the app's answer", |t| {
            t.contains("did not go through")
        })
        .await;
    let denied = tokio::time::timeout(Duration::from_secs(20), finish)
        .await
        .expect("the app finished")
        .unwrap();
    match denied {
        Err(Error::Login(why)) => assert!(why.contains("denied"), "{why}"),
        other => panic!("a denied sign-in: {other:?}"),
    }
}
