// Package e2e holds the spine's end-to-end tests: the real HTTP façade, a
// real nats-server with JetStream, and the real worker runtime, with small
// test backends standing in for the models.
package e2e
