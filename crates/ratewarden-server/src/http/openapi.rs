//! `GET /openapi.json`: the OpenAPI 3.1 document of every route, built
//! from the handlers' `#[utoipa::path]` attributes and the answer types'
//! `ToSchema` derives (see [`super::routes_and_api`]).

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::routing::get;
use utoipa::OpenApi;
use utoipa::openapi::OpenApi as Document;

/// The document's fixed parts: title, version, description, tags, the
/// shared problem schema.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "ratewarden",
        description = "A rate-limiting service: the seed routes (GET /ping, GET /status, POST /rate/check, GET /rate/status, DELETE /rate/reset/{user_id}) the general decision API (/v1) and Envoy's rate limit service in protobuf JSON (POST /json). Errors are RFC 9457 problem details (application/problem+json). See docs/api.md."
    ),
    tags(
        (name = "seed", description = "The seed routes: a fixed window per client (/ping) and a sliding log per user and endpoint (/rate)"),
        (name = "decisions", description = "Checks of any policy, decided all or nothing, and reads"),
        (name = "admin", description = "Fail closed: needs X-Admin-Key"),
        (name = "envoy", description = "Envoy's rate limit service (envoy.service.ratelimit.v3) in protobuf JSON; the same service is on --grpc-listen. See docs/envoy.md"),
        (name = "forward-auth", description = "Forward auth for nginx auth_request, Caddy forward_auth and Traefik ForwardAuth (any method). See docs/forward-auth.md"),
        (name = "meta", description = "This document"),
    ),
    paths(handle, crate::http::authorize::handle),
    components(schemas(
        crate::http::problem::Problem,
        crate::http::v1::schema::KeyPart,
        crate::http::v1::schema::PolicyName,
        crate::http::v1::schema::UserId,
    ))
)]
struct Base;

/// The base document, version from the crate.
pub fn base() -> Document {
    let mut doc = Base::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    every_method_of_authorize(&mut doc);
    doc
}

/// `/v1/authorize` answers every method alike (a proxy may forward any),
/// so the document lists its operation under each method OpenAPI knows,
/// with an `operationId` of its own (`authorize` for GET, `authorizePost`,
/// …): client generators name methods after them, so they must differ.
fn every_method_of_authorize(doc: &mut Document) {
    let Some(item) = doc.paths.paths.get_mut("/v1/authorize") else {
        return;
    };
    let Some(get) = item.get.clone() else {
        return;
    };
    let copy = |method: &str| {
        let mut op = get.clone();
        op.operation_id = Some(format!("authorize{method}"));
        Some(op)
    };
    item.put = copy("Put");
    item.post = copy("Post");
    item.delete = copy("Delete");
    item.options = copy("Options");
    item.head = copy("Head");
    item.patch = copy("Patch");
    item.trace = copy("Trace");
}

/// The OpenAPI document (JSON).
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "openApi",
    tag = "meta",
    responses((status = 200, description = "The OpenAPI 3.1 document of every route", content_type = "application/json"))
)]
#[allow(dead_code)] // read by `#[openapi(paths(handle))]` only
async fn handle() -> &'static str {
    // Never routed: `route` serves the document (which must exist before
    // its own route); this function only carries the route's description.
    ""
}

/// The route serving `api`, serialized once.
pub fn route<S: Clone + Send + Sync + 'static>(api: Document) -> Router<S> {
    let json: Arc<serde_json::Value> =
        Arc::new(serde_json::to_value(&api).unwrap_or(serde_json::Value::Null));
    Router::new().route(
        "/openapi.json",
        get(move || {
            let json = Arc::clone(&json);
            async move { Json((*json).clone()) }
        }),
    )
}

#[cfg(test)]
mod tests {
    /// Client generators name methods after operation ids: each route has
    /// its own, not the handlers' shared function name `handle`.
    #[test]
    fn every_operation_has_an_id_of_its_own() {
        let (_, api) = crate::http::routes_and_api().split_for_parts();
        let doc = serde_json::to_value(&api).unwrap_or_default();
        let mut ids: Vec<String> = Vec::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for (method, op) in item.as_object().into_iter().flatten() {
                let id = op["operationId"].as_str().unwrap_or_default().to_owned();
                assert!(!id.is_empty(), "{method} {path} has no operationId");
                assert!(!ids.contains(&id), "{method} {path}: '{id}' is used twice");
                ids.push(id);
            }
        }
        assert!(ids.len() >= 11, "{ids:?}");
    }

    /// `/v1/authorize` answers every method, and the document says so.
    #[test]
    fn authorize_is_listed_under_every_method() {
        let (_, api) = crate::http::routes_and_api().split_for_parts();
        let doc = serde_json::to_value(&api).unwrap_or_default();
        let item = &doc["paths"]["/v1/authorize"];
        for method in [
            "get", "put", "post", "delete", "options", "head", "patch", "trace",
        ] {
            let op = &item[method];
            assert!(op.is_object(), "{method} is missing: {item}");
            assert_eq!(op["tags"][0], "forward-auth", "{method}");
            assert!(op["responses"]["429"].is_object(), "{method}");
        }
        assert_eq!(item["get"]["operationId"], "authorize");
        assert_eq!(item["post"]["operationId"], "authorizePost");
    }
}
