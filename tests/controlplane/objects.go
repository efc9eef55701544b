package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

const (
	testNamespace = "kubelease-test"
	saName        = "kubelease"
	roleName      = "kubelease-leases" // Leases, and create on Events (--events)
	tokenTTL      = 24 * time.Hour
	// kubeleased's reviews (--auth kubernetes): create TokenReviews and
	// SubjectAccessReviews, cluster-scoped.
	reviewRoleName = "kubelease-reviews"
	// The test clients: the ServiceAccount replica, allowed every verb on
	// elections.kubelease.io in every namespace, with a token for the
	// audience kubelease.
	replicaName      = "replica"
	electionRoleName = "kubelease-test-elections"
	replicaAudience  = "kubelease"
	// An operator: may read elections and hand off others' terms (verb
	// handoff), not campaign.
	operatorName     = "operator"
	operatorRoleName = "kubelease-test-operators"
)

type obj = map[string]any

// testTokens: the ServiceAccount kubelease's token (kubeleased's own
// credentials), the ServiceAccount replica's (the test clients') and the
// ServiceAccount operator's.
type testTokens struct {
	sa, replica, operator string
}

// step: an object to create (POST body to path).
type step struct {
	path string
	body obj
}

// clusterRoleAndBinding: a ClusterRole with rules and its binding to the
// ServiceAccount sa of the test namespace.
func clusterRoleAndBinding(name string, rules []obj, sa string) []step {
	return []step{
		{"/apis/rbac.authorization.k8s.io/v1/clusterroles", obj{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
			"metadata": obj{"name": name}, "rules": rules,
		}},
		{"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", obj{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": obj{"name": name},
			"roleRef":  obj{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
			"subjects": []obj{{"kind": "ServiceAccount", "name": sa, "namespace": testNamespace}},
		}},
	}
}

// setupObjects creates the namespace, the ServiceAccounts, their roles and
// bindings, requests a token for each ServiceAccount and waits until both
// are authorised (RBAC reaches the authorizer through an informer, so there
// is a short window in which they are not yet).
func (c *cluster) setupObjects(ctx context.Context) (tokens testTokens, err error) {
	ns := "/api/v1/namespaces/" + testNamespace
	steps := []step{
		{"/api/v1/namespaces", obj{"apiVersion": "v1", "kind": "Namespace",
			"metadata": obj{"name": testNamespace}}},
		{ns + "/serviceaccounts", obj{"apiVersion": "v1", "kind": "ServiceAccount",
			"metadata": obj{"name": saName}}},
		{"/apis/rbac.authorization.k8s.io/v1/namespaces/" + testNamespace + "/roles", obj{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
			"metadata": obj{"name": roleName},
			"rules": []obj{{
				"apiGroups": []string{"coordination.k8s.io"},
				"resources": []string{"leases"},
				"verbs":     []string{"get", "list", "watch", "create", "update", "patch", "delete"},
			}, {
				// kubeleased --events: an Event on the Lease at each term's start and end.
				"apiGroups": []string{""},
				"resources": []string{"events"},
				"verbs":     []string{"create"},
			}},
		}},
		{"/apis/rbac.authorization.k8s.io/v1/namespaces/" + testNamespace + "/rolebindings", obj{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
			"metadata": obj{"name": roleName},
			"roleRef":  obj{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": roleName},
			"subjects": []obj{{"kind": "ServiceAccount", "name": saName, "namespace": testNamespace}},
		}},
		{ns + "/serviceaccounts", obj{"apiVersion": "v1", "kind": "ServiceAccount",
			"metadata": obj{"name": replicaName}}},
		{ns + "/serviceaccounts", obj{"apiVersion": "v1", "kind": "ServiceAccount",
			"metadata": obj{"name": operatorName}}},
	}
	reviews := clusterRoleAndBinding(reviewRoleName, []obj{
		{"apiGroups": []string{"authentication.k8s.io"}, "resources": []string{"tokenreviews"},
			"verbs": []string{"create"}},
		{"apiGroups": []string{"authorization.k8s.io"}, "resources": []string{"subjectaccessreviews"},
			"verbs": []string{"create"}},
	}, saName)
	elections := clusterRoleAndBinding(electionRoleName, []obj{
		{"apiGroups": []string{"kubelease.io"}, "resources": []string{"elections"},
			"verbs": []string{"campaign", "get", "watch", "list"}},
	}, replicaName)
	operators := clusterRoleAndBinding(operatorRoleName, []obj{
		{"apiGroups": []string{"kubelease.io"}, "resources": []string{"elections"},
			"verbs": []string{"get", "watch", "list", "handoff"}},
	}, operatorName)
	steps = append(append(append(steps, reviews...), elections...), operators...)
	deadline := time.Now().Add(c.timeout)
	for _, s := range steps {
		if _, err := c.post(ctx, deadline, s.path, s.body, true); err != nil {
			return tokens, err
		}
	}
	if tokens.sa, err = c.requestToken(ctx, deadline, saName, ""); err != nil {
		return tokens, err
	}
	if tokens.replica, err = c.requestToken(ctx, deadline, replicaName, replicaAudience); err != nil {
		return tokens, err
	}
	if tokens.operator, err = c.requestToken(ctx, deadline, operatorName, replicaAudience); err != nil {
		return tokens, err
	}
	leases := c.apiURL() + "/apis/coordination.k8s.io/v1/namespaces/" + testNamespace + "/leases"
	if err := c.waitAuthorized(ctx, tokens.sa, "list leases", http.MethodGet, leases, nil); err != nil {
		return tokens, err
	}
	// kubeleased's credentials may review, and the replica may campaign.
	sar := c.apiURL() + "/apis/authorization.k8s.io/v1/subjectaccessreviews"
	if err := c.waitAuthorized(ctx, tokens.sa, "review the replica's access to elections", http.MethodPost, sar, electionReview(replicaName, "campaign")); err != nil {
		return tokens, err
	}
	if err := c.waitAuthorized(ctx, tokens.sa, "review the operator's access to elections", http.MethodPost, sar, electionReview(operatorName, "handoff")); err != nil {
		return tokens, err
	}
	return tokens, nil
}

// electionReview: a SubjectAccessReview of ServiceAccount sa's verb on an
// election in the test namespace.
func electionReview(sa, verb string) []byte {
	review, _ := json.Marshal(obj{
		"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
		"spec": obj{"user": "system:serviceaccount:" + testNamespace + ":" + sa,
			"groups": []string{"system:serviceaccounts", "system:serviceaccounts:" + testNamespace, "system:authenticated"},
			"resourceAttributes": obj{"namespace": testNamespace, "verb": verb,
				"group": "kubelease.io", "resource": "elections", "name": "x"}},
	})
	return review
}

// requestToken asks the TokenRequest API for a token of the ServiceAccount
// name in the test namespace, for audience (empty: the apiserver's own).
func (c *cluster) requestToken(ctx context.Context, deadline time.Time, name, audience string) (string, error) {
	spec := obj{"expirationSeconds": int64(tokenTTL / time.Second)}
	if audience != "" {
		spec["audiences"] = []string{audience}
	}
	resp, err := c.post(ctx, deadline, "/api/v1/namespaces/"+testNamespace+"/serviceaccounts/"+name+"/token", obj{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec,
	}, false)
	if err != nil {
		return "", err
	}
	var tr struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal(resp, &tr); err != nil || tr.Status.Token == "" {
		return "", fmt.Errorf("TokenRequest for %s/%s returned no token: %.200s", testNamespace, name, resp)
	}
	return tr.Status.Token, nil
}

// waitAuthorized waits until a request with token succeeds: a GET, or a
// POST of a SubjectAccessReview (body) whose answer allows.
func (c *cluster) waitAuthorized(ctx context.Context, token, what, method, url string, body []byte) error {
	hc, err := c.client(false, token)
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(c.timeout)
	last := ""
	for {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err == nil {
			out, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			ok := resp.StatusCode == http.StatusOK
			if body != nil {
				ok = resp.StatusCode == http.StatusCreated && bytes.Contains(out, []byte(`"allowed":true`))
			}
			if ok {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, out)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the ServiceAccount token still cannot %s after %s (last answer: %s)", what, c.timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// post creates an object as admin, retrying transient failures (the
// namespace not yet visible to admission, 429, 5xx) until deadline.
// With existsOK, 409 AlreadyExists counts as success.
func (c *cluster) post(ctx context.Context, deadline time.Time, path string, body obj, existsOK bool) ([]byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.apiURL()+path, bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		var status int
		var out []byte
		resp, err := c.admin.Do(req)
		if err == nil {
			out, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			status = resp.StatusCode
			switch {
			case status == http.StatusCreated || status == http.StatusOK:
				return out, nil
			case status == http.StatusConflict && existsOK:
				return out, nil
			case status != http.StatusNotFound && status != http.StatusTooManyRequests && status < 500:
				return nil, fmt.Errorf("POST %s: HTTP %d: %.300s", path, status, out)
			}
			err = fmt.Errorf("HTTP %d: %.300s", status, out)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("POST %s: %v", path, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
