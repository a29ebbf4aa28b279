package gak

// Times (Until, CompletedAt, Prune's before) are milliseconds since the
// Unix epoch, as the kernel's clock reads them; a ttl is a time.Duration
// of whole milliseconds (sub-millisecond parts are dropped), 1 ms to a
// year. An optional number is a pointer (nil: absent); an optional string
// is "" when absent, since no id, token or fingerprint may be empty.

// StepDef is a step of a run's DAG.
type StepDef struct {
	ID        string
	DependsOn []string
}

// Snapshot is a run's progress: the finished steps, at a sequence number.
type Snapshot struct {
	RunID string
	Seq   uint64
	// Fence is the writer's takeover generation (its claim's fence); nil:
	// none, which counts as 0.
	Fence  *uint64
	Status string
	Done   []string
	// Fields are free-form; the kernel stores them sorted by key.
	Fields map[string]string
}

// Plan is a resume plan: Skip is the trusted completion set, Run the
// steps to run in order, Untrusted the done records that are not trusted.
type Plan struct {
	Skip      []string
	Run       []string
	Untrusted []string
}

// Status is a terminal outcome's status.
type Status string

// The outcome statuses.
const (
	Succeeded Status = "succeeded"
	Failed    Status = "failed"
)

// Outcome is a run's or step's terminal outcome.
type Outcome struct {
	Status Status
	Result []byte
}

// RetrySafety says whether a "not applied" verdict may clear a key.
type RetrySafety string

// The retry safeties ("" is Safe).
const (
	Safe   RetrySafety = "safe"
	Unsafe RetrySafety = "unsafe"
)

// Action is an effect, named by its idempotency key.
type Action struct {
	// Key is the idempotency key: pass it to the remote API too.
	Key      string
	Resource string
	// RetrySafety defaults to Safe.
	RetrySafety RetrySafety
	// Fingerprint is a digest of the action's parameters ("" for none):
	// one key, one logical action.
	Fingerprint string
}

// NewAction is an action that is safe to retry, without a fingerprint.
func NewAction(key, resource string) Action {
	return Action{Key: key, Resource: resource, RetrySafety: Safe}
}

// Lease is the right to run one attempt of an effect. Holder is a
// capability: never log it (no fmt verb shows it).
type Lease struct {
	Key      string
	Resource string
	Fence    uint64
	Holder   string
	Until    uint64
}

// Kind is what acquire decided, or how a Runner's run ended.
type Kind string

// The kinds of answer of Sideeffect.Acquire and Runner.Run.
const (
	// Granted: run the effect under the lease (Acquire only).
	Granted Kind = "granted"
	// Applied: the body ran now and its result was recorded (Run only).
	Applied Kind = "applied"
	// Replayed: the key completed before; Result is the first result.
	Replayed Kind = "replayed"
	// Uncertain: nobody knows whether it happened (Reason); reconcile.
	Uncertain Kind = "uncertain"
	// InFlight: another attempt of the key is live.
	InFlight Kind = "in-flight"
	// Contended: another key holds the resource Until then.
	Contended Kind = "contended"
)

// Acquired is what Sideeffect.Acquire decided; Kind says which fields
// are set.
type Acquired struct {
	Kind   Kind
	Lease  Lease  // Granted
	Result []byte // Replayed
	Reason string // Uncertain
	Until  uint64 // Contended
}

// ReconcileClaim is the right to reconcile an uncertain key. Claim is a
// capability (no fmt verb shows it).
type ReconcileClaim struct {
	Claim string
	Until uint64
}

// Resolution is a reconciler's verdict on an uncertain key.
type Resolution struct {
	Applied bool
	// Result is recorded when Applied (nil: empty).
	Result         []byte
	ForceRetryable bool
	// Claim is the reconcile claim, if one was taken ("" for none).
	Claim string
}

// Resolved is what a verdict resolved the key to: Replayed (with the
// recorded Result) or Cleared.
type Resolved struct {
	Cleared bool
	Result  []byte
}

// KeyState is a side-effect key's state.
type KeyState string

// The key states ("" means any, in Sideeffect.List).
const (
	KeyCleared   KeyState = "cleared"
	KeyInFlight  KeyState = "in-flight"
	KeyUncertain KeyState = "uncertain"
	KeyCompleted KeyState = "completed"
)

// KeyInfo is a side-effect key as List and Get show it (never a holder,
// a fence-holder pair or a reconcile claim).
type KeyInfo struct {
	Key         string
	State       KeyState
	RetrySafety RetrySafety
	Fingerprint string
	Resource    string
	// Until is the intent's deadline (in flight, and uncertain by expiry).
	Until *uint64
	// Reason is set when State is KeyUncertain.
	Reason           string
	CompletedAt      *uint64
	ReconcilingUntil *uint64
}

// KeyPage is one page of keys; Next is the cursor for the next page
// ("" on the last).
type KeyPage struct {
	Items []KeyInfo
	Next  string
}

// TaskState is a task's state.
type TaskState string

// The task states ("" means any in Taskboard.List, open in a seed).
const (
	TaskOpen    TaskState = "open"
	TaskClaimed TaskState = "claimed"
	TaskDone    TaskState = "done"
	TaskFailed  TaskState = "failed"
)

// TaskSeed is a task to load onto the board.
type TaskSeed struct {
	ID    string
	Title string
	Deps  []string
	// State is TaskOpen (the default), TaskFailed or TaskDone.
	State TaskState
}

// Task is a task on the board. Token is a capability, set only by Claim,
// ClaimNext and Renew (no fmt verb shows it).
type Task struct {
	ID    string
	Title string
	Deps  []string
	State TaskState
	// Owner is the claimer ("" for none).
	Owner string
	// Token is the claim's token ("" for none).
	Token string
	// Until is the claim's deadline.
	Until *uint64
	// Fence is the takeover generation: strictly increasing per task.
	Fence uint64
}

// TaskPage is one page of the board; Next is the cursor for the next page
// ("" on the last).
type TaskPage struct {
	Items []Task
	Next  string
}

// Pruned is what one Retention.Prune removed.
type Pruned struct {
	RemovedKeys  uint32
	RemovedTasks uint32
	RemovedRuns  uint32
	// More is true when removable records older than before remain.
	More bool
}

// Ptr is a pointer to v (for the optional numbers of a Snapshot).
func Ptr[T any](v T) *T { return &v }
