package conformance

import (
	"context"
	"errors"

	gak "github.com/gak-kernel/gak/host/go"
)

// sinkBody is the vectors' reference body (append "m" to the resource's
// marker, then fail if asked to) and the ways a body may misbehave in the
// host-protocol cases (tests/host-protocol/README.md).
func sinkBody(k *gak.Kernel, kind, key string, fail bool, inner *string) gak.SinkBody {
	return func(ctx context.Context, down *gak.Downstream) error {
		if kind == "reenter" {
			answer := "ok"
			if _, err := k.Sideeffect().SinkSeen(ctx, key); err != nil {
				answer = gak.Code(err)
			}
			*inner = answer
		}
		appended := func() error {
			marker, _, err := down.Get(key)
			if err != nil {
				return err
			}
			return down.Put(key, marker+"m")
		}()
		if kind != "swallow" && appended != nil {
			return appended
		}
		switch kind {
		case "raw-commit":
			if _, err := down.Exec("COMMIT"); err != nil {
				return err
			}
		case "raw-rollback":
			if _, err := down.Exec("ROLLBACK"); err != nil {
				return err
			}
		case "raw-error":
			_, _ = down.Exec("SELECT * FROM gak_no_such_table")
		}
		if fail {
			return errors.New("the reference body fails on purpose")
		}
		return nil
	}
}

func bodyKind(a any) (string, error) {
	kind, err := optString(a, "body")
	if err != nil {
		return "", err
	}
	if kind == nil {
		return "append", nil
	}
	switch *kind {
	case "append", "swallow", "reenter", "raw-commit", "raw-rollback", "raw-error":
		return *kind, nil
	}
	return "", &malformed{"body: unknown kind " + *kind}
}

// call maps one vector call onto the typed API: (answer, refusal), or an
// *invalid / *malformed argument error.
func call(ctx context.Context, k *gak.Kernel, name string, a any, ex *extra) (any, error, error) {
	cp, cg, se, tb := k.Checkpoint(), k.Commitgate(), k.Sideeffect(), k.Taskboard()
	done := func(err error) (any, error, error) { return nil, err, nil }
	switch name {
	case "checkpoint.save-if-newer":
		o, err := object(a, "snapshot")
		if err != nil {
			return nil, nil, err
		}
		s, err := snapshot(o)
		if err != nil {
			return nil, nil, err
		}
		return done(cp.SaveIfNewer(ctx, s))
	case "checkpoint.load":
		id, err := stringOrEmpty(a, "run-id")
		if err != nil {
			return nil, nil, err
		}
		s, err := cp.Load(ctx, id)
		if err != nil {
			return done(err)
		}
		return snapshotJSON(s), nil, nil
	case "checkpoint.build-plan":
		var steps []gak.StepDef
		if raw, ok := field(a, "steps"); ok {
			items, isArr := raw.([]any)
			if !isArr {
				return nil, nil, &malformed{"steps: got " + show(raw)}
			}
			for _, item := range items {
				id, err := stringOrEmpty(item, "id")
				if err != nil {
					return nil, nil, err
				}
				deps, err := stringsOf(item, "depends-on")
				if err != nil {
					return nil, nil, err
				}
				steps = append(steps, gak.StepDef{ID: id, DependsOn: deps})
			}
		}
		var snap *gak.Snapshot
		if raw, ok := field(a, "snapshot"); ok {
			s, err := snapshot(raw)
			if err != nil {
				return nil, nil, err
			}
			snap = &s
		}
		p, err := cp.BuildPlan(ctx, steps, snap)
		if err != nil {
			return done(err)
		}
		return obj{"skip": strs(p.Skip), "run": strs(p.Run), "untrusted": strs(p.Untrusted)}, nil, nil
	case "commitgate.commit":
		o, err := object(a, "outcome")
		if err != nil {
			return nil, nil, err
		}
		st, err := status(o)
		if err != nil {
			return nil, nil, err
		}
		result, err := bytesOf(o, "result")
		if err != nil {
			return nil, nil, err
		}
		run, err := stringOrEmpty(a, "run-id")
		if err != nil {
			return nil, nil, err
		}
		step, err := optString(a, "step")
		if err != nil {
			return nil, nil, err
		}
		fence, err := optNumber(a, "fence")
		if err != nil {
			return nil, nil, err
		}
		var f uint64
		if fence != nil {
			f = *fence
		}
		outcome := gak.Outcome{Status: st, Result: result}
		var got gak.Outcome
		if step != nil {
			got, err = cg.CommitStep(ctx, run, *step, f, outcome)
		} else {
			got, err = cg.Commit(ctx, run, f, outcome)
		}
		if err != nil {
			return done(err)
		}
		return outcomeJSON(got), nil, nil
	case "commitgate.read":
		run, err := stringOrEmpty(a, "run-id")
		if err != nil {
			return nil, nil, err
		}
		step, err := optString(a, "step")
		if err != nil {
			return nil, nil, err
		}
		var got gak.Outcome
		if step != nil {
			got, err = cg.ReadStep(ctx, run, *step)
		} else {
			got, err = cg.Read(ctx, run)
		}
		if err != nil {
			return done(err)
		}
		return outcomeJSON(got), nil, nil
	case "sideeffect.acquire":
		act, err := action(a)
		if err != nil {
			return nil, nil, err
		}
		d, err := ttl(a)
		if err != nil {
			return nil, nil, err
		}
		got, err := se.Acquire(ctx, act, d)
		if err != nil {
			return done(err)
		}
		switch got.Kind {
		case gak.Granted:
			return obj{"granted": leaseJSON(got.Lease)}, nil, nil
		case gak.Replayed:
			return obj{"replayed": text(got.Result)}, nil, nil
		case gak.Uncertain:
			return obj{"uncertain": got.Reason}, nil, nil
		case gak.InFlight:
			return obj{"in-flight": obj{}}, nil, nil
		case gak.Contended:
			return obj{"contended": obj{"until": num(got.Until)}}, nil, nil
		}
		return obj{"unknown": string(got.Kind)}, nil, nil
	case "sideeffect.complete", "sideeffect.release", "sideeffect.abandon", "sideeffect.renew", "sideeffect.mark-uncertain":
		act, err := action(a)
		if err != nil {
			return nil, nil, err
		}
		l, err := lease(a)
		if err != nil {
			return nil, nil, err
		}
		switch name {
		case "sideeffect.complete":
			result, err := bytesOf(a, "result")
			if err != nil {
				return nil, nil, err
			}
			got, err := se.Complete(ctx, act, l, result)
			if err != nil {
				return done(err)
			}
			return text(got), nil, nil
		case "sideeffect.release":
			return done(se.Release(ctx, act, l))
		case "sideeffect.renew":
			d, err := ttl(a)
			if err != nil {
				return nil, nil, err
			}
			got, err := se.Renew(ctx, act, l, d)
			if err != nil {
				return done(err)
			}
			return leaseJSON(got), nil, nil
		}
		reason, err := stringOrEmpty(a, "reason")
		if err != nil {
			return nil, nil, err
		}
		if name == "sideeffect.abandon" {
			return done(se.Abandon(ctx, act, l, reason))
		}
		return done(se.MarkUncertain(ctx, act, l, reason))
	case "sideeffect.begin-reconcile":
		act, err := action(a)
		if err != nil {
			return nil, nil, err
		}
		d, err := ttl(a)
		if err != nil {
			return nil, nil, err
		}
		got, err := se.BeginReconcile(ctx, act, d)
		if err != nil {
			return done(err)
		}
		return obj{"claim": got.Claim, "until": num(got.Until)}, nil, nil
	case "sideeffect.resolve-uncertain":
		r, err := object(a, "resolution")
		if err != nil {
			return nil, nil, err
		}
		var res gak.Resolution
		if res.Applied, err = boolean(r, "applied"); err != nil {
			return nil, nil, err
		}
		if _, ok := field(r, "result"); ok {
			if res.Result, err = bytesOf(r, "result"); err != nil {
				return nil, nil, err
			}
		}
		if res.ForceRetryable, err = boolean(r, "force-retryable"); err != nil {
			return nil, nil, err
		}
		claim, err := optString(r, "claim")
		if err != nil {
			return nil, nil, err
		}
		if claim != nil {
			res.Claim = *claim
		}
		act, err := action(a)
		if err != nil {
			return nil, nil, err
		}
		got, err := se.ResolveUncertain(ctx, act, res)
		if err != nil {
			return done(err)
		}
		if got.Cleared {
			return obj{"cleared": obj{}}, nil, nil
		}
		return obj{"replayed": text(got.Result)}, nil, nil
	case "sink.write-fenced":
		resource, err := stringOrEmpty(a, "resource")
		if err != nil {
			return nil, nil, err
		}
		fail, err := boolean(a, "fail")
		if err != nil {
			return nil, nil, err
		}
		fence, err := number(a, "fence")
		if err != nil {
			return nil, nil, err
		}
		kind, err := bodyKind(a)
		if err != nil {
			return nil, nil, err
		}
		var inner string
		werr := se.WriteFenced(ctx, resource, fence, sinkBody(k, kind, resource, fail, &inner))
		if kind == "reenter" {
			ex.inner = &inner
		}
		return done(werr)
	case "sink.read":
		resource, err := stringOrEmpty(a, "resource")
		if err != nil {
			return nil, nil, err
		}
		seen, err := se.SinkSeen(ctx, resource)
		if err != nil {
			return done(err)
		}
		var marker string
		err = k.WithDownstream(ctx, func(_ context.Context, down *gak.Downstream) error {
			m, _, err := down.Get(resource)
			marker = m
			return err
		})
		if err != nil {
			return done(err)
		}
		return obj{"seen-fence": num(seen), "marker": marker}, nil, nil
	case "taskboard.seed":
		var seeds []gak.TaskSeed
		if raw, ok := field(a, "tasks"); ok {
			items, isArr := raw.([]any)
			if !isArr {
				return nil, nil, &malformed{"tasks: got " + show(raw)}
			}
			for _, t := range items {
				var s gak.TaskSeed
				var err error
				if s.ID, err = stringOrEmpty(t, "id"); err != nil {
					return nil, nil, err
				}
				if s.Title, err = stringOrEmpty(t, "title"); err != nil {
					return nil, nil, err
				}
				if s.Deps, err = stringsOf(t, "deps"); err != nil {
					return nil, nil, err
				}
				if s.State, err = taskState(t); err != nil {
					return nil, nil, err
				}
				seeds = append(seeds, s)
			}
		}
		return done(tb.Seed(ctx, seeds))
	case "taskboard.list":
		state, err := taskState(a)
		if err != nil {
			return nil, nil, err
		}
		if _, ok := field(a, "limit"); !ok {
			// The 0.1 form: the whole board as an array, page by page.
			all := []any{}
			after := ""
			for {
				p, err := tb.List(ctx, state, after, 1000)
				if err != nil {
					return done(err)
				}
				for _, t := range p.Items {
					all = append(all, taskJSON(t))
				}
				if p.Next == "" {
					return all, nil, nil
				}
				after = p.Next
			}
		}
		after, err := cursor(a)
		if err != nil {
			return nil, nil, err
		}
		n, err := limit(a)
		if err != nil {
			return nil, nil, err
		}
		p, err := tb.List(ctx, state, deref(after), n)
		if err != nil {
			return done(err)
		}
		items := make([]any, len(p.Items))
		for i, t := range p.Items {
			items[i] = taskJSON(t)
		}
		return page(items, p.Next), nil, nil
	case "taskboard.get":
		id, err := stringOrEmpty(a, "id")
		if err != nil {
			return nil, nil, err
		}
		t, err := tb.Get(ctx, id)
		if err != nil {
			return done(err)
		}
		return taskJSON(t), nil, nil
	case "taskboard.claim-next":
		agent, err := stringOrEmpty(a, "agent")
		if err != nil {
			return nil, nil, err
		}
		d, err := ttl(a)
		if err != nil {
			return nil, nil, err
		}
		t, ok, err := tb.ClaimNext(ctx, agent, d)
		if err != nil {
			return done(err)
		}
		if !ok {
			return nil, nil, nil
		}
		return taskJSON(t), nil, nil
	case "sideeffect.list":
		state, err := keyState(a)
		if err != nil {
			return nil, nil, err
		}
		after, err := cursor(a)
		if err != nil {
			return nil, nil, err
		}
		n, err := limit(a)
		if err != nil {
			return nil, nil, err
		}
		p, err := se.List(ctx, state, deref(after), n)
		if err != nil {
			return done(err)
		}
		items := make([]any, len(p.Items))
		for i, info := range p.Items {
			items[i] = keyInfoJSON(info)
		}
		return page(items, p.Next), nil, nil
	case "sideeffect.get":
		key, err := stringOrEmpty(a, "key")
		if err != nil {
			return nil, nil, err
		}
		info, err := se.Get(ctx, key)
		if err != nil {
			return done(err)
		}
		return keyInfoJSON(info), nil, nil
	case "retention.prune":
		before, err := number(a, "before")
		if err != nil {
			return nil, nil, err
		}
		n, err := limit(a)
		if err != nil {
			return nil, nil, err
		}
		p, err := k.Retention().Prune(ctx, before, n)
		if err != nil {
			return done(err)
		}
		return obj{
			"removed-keys": num(uint64(p.RemovedKeys)), "removed-tasks": num(uint64(p.RemovedTasks)),
			"removed-runs": num(uint64(p.RemovedRuns)), "more": p.More,
		}, nil, nil
	case "taskboard.claim", "taskboard.renew":
		id, err := stringOrEmpty(a, "id")
		if err != nil {
			return nil, nil, err
		}
		d, err := ttl(a)
		if err != nil {
			return nil, nil, err
		}
		var t gak.Task
		if name == "taskboard.claim" {
			agent, err := stringOrEmpty(a, "agent")
			if err != nil {
				return nil, nil, err
			}
			t, err = tb.Claim(ctx, id, agent, d)
			if err != nil {
				return done(err)
			}
		} else {
			token, err := stringOrEmpty(a, "token")
			if err != nil {
				return nil, nil, err
			}
			t, err = tb.Renew(ctx, id, token, d)
			if err != nil {
				return done(err)
			}
		}
		return taskJSON(t), nil, nil
	case "taskboard.release", "taskboard.complete":
		id, err := stringOrEmpty(a, "id")
		if err != nil {
			return nil, nil, err
		}
		token, err := stringOrEmpty(a, "token")
		if err != nil {
			return nil, nil, err
		}
		if name == "taskboard.release" {
			return done(tb.Release(ctx, id, token))
		}
		return done(tb.Complete(ctx, id, token))
	}
	return nil, nil, &malformed{"unknown call " + name}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// cursor is a list's "after": the Go API says "" for "from the start", so
// it cannot send an empty cursor, which the kernel refuses as an empty id;
// the runner gives the kernel's answer for it.
func cursor(a any) (*string, error) {
	after, err := optString(a, "after")
	if err == nil && after != nil && *after == "" {
		return nil, &invalid{"after: an empty id"}
	}
	return after, err
}
