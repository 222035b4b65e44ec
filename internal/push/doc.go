// Package push tells a workspace of a new file within a second, without
// a poll: after a stage or a commit has committed, the service publishes
// a hint (the workspace's and the files' ids, never a name or a byte) on
// the workspace's MQTT topic, and a client that holds a subscription
// pulls at once (pendingctl pull --watch, client/watch). A hint is only a
// hint: the list stays the truth, a lost hint delays a file until the
// client's slow fallback poll, and publishing never fails an upload.
//
// In AWS the broker is AWS IoT Core (MQTT over WebSockets on 443): the
// upload function writes each hint to a DynamoDB table (Table), whose
// stream the relay (Relay, functions/pushrelay, outside the VPC) publishes
// through IoT Core's HTTPS Publish (IoT, signed with the relay's role),
// so that nothing in the VPC needs IoT Core's data endpoint; IoT Core asks the custom authorizer (Authorizer,
// functions/pushauth) whether a connection may subscribe; locally (make
// run, the tests) it is an in-process broker, push/localbroker, with the
// same check (Allow) on connect and on subscribe.
//
// The check is the API's: the MQTT username is the workspace's id, the
// password a token allowed on it (pendinguploads.Store.Verify, the same look-up
// by SHA-256), and such a connection may subscribe to Topic(workspace)
// only, and publish nowhere.
package push
