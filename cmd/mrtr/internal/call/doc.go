// Package call is mrtr call, a terminal client: it lists a server's
// tools, prompts and resources, calls one, and answers the server's
// questions (elicitation, sampling, roots) at the terminal, round after
// round.
package call
