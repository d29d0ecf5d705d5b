package transport

import (
	"fmt"
	"slices"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// The role table is the API's: it names gRPC methods, so it lives with the
// handlers, and cluster keeps only what a token is (roles over tenants,
// checked by the FSM again for the tenant).

// methodRoles is the role table: the roles that allow each method. A
// method missing from it is refused to every token (closed by default).
// Cluster-wide methods (clusterWide) also need their role over every
// tenant ("*"): an admin of one tenant may not move leadership.
var methodRoles = map[string][]string{
	pb.Queue_Enqueue_FullMethodName:     {pb.RoleProducer},
	pb.Queue_GetTask_FullMethodName:     {pb.RoleProducer, pb.RoleReader},
	pb.Queue_WaitResult_FullMethodName:  {pb.RoleProducer},
	pb.Queue_Claim_FullMethodName:       {pb.RoleWorker},
	pb.Queue_ClaimBatch_FullMethodName:  {pb.RoleWorker},
	pb.Queue_Heartbeat_FullMethodName:   {pb.RoleWorker},
	pb.Queue_Submit_FullMethodName:      {pb.RoleWorker},
	pb.Queue_SubmitBatch_FullMethodName: {pb.RoleWorker},
	pb.Queue_Nack_FullMethodName:        {pb.RoleWorker},
	pb.Queue_Stats_FullMethodName:       {pb.RoleReader, pb.RoleAdmin},
	pb.Queue_ListDead_FullMethodName:    {pb.RoleAdmin},
	pb.Queue_ListTasks_FullMethodName:   {pb.RoleReader, pb.RoleAdmin},
	pb.Queue_RequeueDead_FullMethodName: {pb.RoleAdmin},
	pb.Queue_Cancel_FullMethodName:      {pb.RoleAdmin},
	// Queue control acts on a whole queue of one tenant, like the DLQ's
	// verbs: admin over that tenant (cluster/service/DESIGN.md says why not a new role).
	pb.Queue_PauseQueue_FullMethodName:  {pb.RoleAdmin},
	pb.Queue_ResumeQueue_FullMethodName: {pb.RoleAdmin},
	pb.Queue_PurgeQueue_FullMethodName:  {pb.RoleAdmin},
	// A schedule enqueues tasks in its tenant's name, so whoever may
	// enqueue there may schedule (cluster/service/DESIGN.md); readers may look.
	pb.Queue_PutSchedule_FullMethodName:    {pb.RoleProducer, pb.RoleAdmin},
	pb.Queue_ListSchedules_FullMethodName:  {pb.RoleProducer, pb.RoleReader, pb.RoleAdmin},
	pb.Queue_RemoveSchedule_FullMethodName: {pb.RoleProducer, pb.RoleAdmin},

	// Retries (feature level 12): a queue's policy and its reset are
	// queue control (admin); snooze is the fence holder's (worker); a
	// waiting task's priority or run-at is its producer's, or an admin's.
	pb.Queue_SetQueueRetry_FullMethodName: {pb.RoleAdmin},
	pb.Queue_ResetQueue_FullMethodName:    {pb.RoleAdmin},
	pb.Queue_Snooze_FullMethodName:        {pb.RoleWorker},
	pb.Queue_UpdateTask_FullMethodName:    {pb.RoleProducer, pb.RoleAdmin},
	// A child's worker reads its parents' results; whoever may read the
	// task may read them too.
	pb.Queue_ParentResults_FullMethodName: {pb.RoleWorker, pb.RoleProducer, pb.RoleReader},
	// Limits of a queue: admin over its tenant. A tenant's own limit
	// (empty queue) bounds what the tenant may take from the cluster, so
	// its own admin may not lift it: transport names no tenant for it,
	// and admin over every tenant is needed.
	pb.Queue_SetQueueLimits_FullMethodName: {pb.RoleAdmin},
	// Fair queues (feature level 16): a key's override is a queue's
	// configuration (admin); its keys are read like its Stats.
	pb.Queue_SetKeyLimit_FullMethodName: {pb.RoleAdmin},
	pb.Queue_ListKeys_FullMethodName:    {pb.RoleReader, pb.RoleAdmin},

	pb.Cluster_TransferLeadership_FullMethodName: {pb.RoleAdmin},
	pb.Cluster_AddServer_FullMethodName:          {pb.RoleAdmin},
	pb.Cluster_RemoveServer_FullMethodName:       {pb.RoleAdmin},
	pb.Cluster_Leave_FullMethodName:              {pb.RoleAdmin},
	pb.Cluster_CreateToken_FullMethodName:        {pb.RoleAdmin},
	pb.Cluster_ListTokens_FullMethodName:         {pb.RoleAdmin},
	pb.Cluster_RevokeToken_FullMethodName:        {pb.RoleAdmin},
	pb.Cluster_SnapshotSave_FullMethodName:       {pb.RoleAdmin},
	pb.Cluster_SnapshotRestore_FullMethodName:    {pb.RoleAdmin},
	// A follower hands back a worker's undelivered claim with the
	// worker's token, held to the items' tenants like the claim was.
	pb.Cluster_ReleaseClaims_FullMethodName: {pb.RoleWorker},
}

var clusterWide = map[string]bool{
	pb.Cluster_TransferLeadership_FullMethodName: true,
	pb.Cluster_AddServer_FullMethodName:          true,
	pb.Cluster_RemoveServer_FullMethodName:       true,
	pb.Cluster_Leave_FullMethodName:              true,
	pb.Cluster_CreateToken_FullMethodName:        true,
	pb.Cluster_ListTokens_FullMethodName:         true,
	pb.Cluster_RevokeToken_FullMethodName:        true,
	pb.Cluster_SnapshotSave_FullMethodName:       true,
	pb.Cluster_SnapshotRestore_FullMethodName:    true,
	// RequeueDead by task id names no tenant; the FSM has none to check.
}

// openMethod reports whether a method needs no token even with auth on:
// Cluster.Status, which every node calls on the others for discovery,
// joins and consistency checks before any token exists, and which tells
// only the cluster's shape (as Consul's /v1/status endpoints, which take
// no ACL token). Health is not a Docket method and is always open.
func openMethod(method string) bool {
	return method == pb.Cluster_Status_FullMethodName
}

// authorizeToken decides whether tok may call method for tenant: one of the
// method's roles, over that tenant. tenant "" is a call that names no
// tenant: a listing (Stats), answered only with the token's tenants
// (GrantsTenant); any other call without a tenant (cluster-wide methods,
// RequeueDead by id) needs its role over "*".
func authorizeToken(tok *pb.Token, method, tenant string) error {
	roles, ok := methodRoles[method]
	if !ok || !slices.ContainsFunc(roles, func(r string) bool { return slices.Contains(tok.GetRoles(), r) }) {
		return fmt.Errorf("%w: %s needs one of the roles %v", service.ErrPermissionDenied, method, roles)
	}
	switch {
	case clusterWide[method] || tenant == "" && method != pb.Queue_Stats_FullMethodName:
		if !slices.Contains(tok.GetTenants(), pb.AllTenants) {
			return fmt.Errorf("%w: %s needs its role over every tenant (\"*\")", service.ErrPermissionDenied, method)
		}
	case tenant != "":
		if !service.GrantsTenant(tok, tenant) {
			return fmt.Errorf("%w: the token does not grant tenant %q", service.ErrPermissionDenied, tenant)
		}
	}
	return nil
}
