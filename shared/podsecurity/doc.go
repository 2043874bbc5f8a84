// Package podsecurity gives generated pods the Pod Security Standards
// "restricted" profile and checks them with the policy code that the API
// server's own pod security admission runs.
package podsecurity
