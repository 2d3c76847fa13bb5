// Package service holds what a daemon of several services (brownoutd's
// services:) and its clients must agree on: how a service is named, and
// the two ways a request says which one it is for.
//
//   - By path: every route of a service is under /services/{name}/ (Base):
//     /services/{name}/ofrep/v1/…, /services/{name}/v1/…, its dial at
//     /services/{name}/. A client given a base URL (an OFREP provider, the
//     remote provider, the pusher) is given the service's.
//   - By header: a request to the daemon's root routes (/ofrep/v1/…,
//     /v1/…) says Header: {name}. The router reads it before the body,
//     so that a push is checked against its service's tokens and caps
//     before a byte of it is read.
//
// A name is a DNS label's alphabet (Check): it goes into URLs, headers,
// file names (each service's state directory) and metric labels without
// escaping.
package service
