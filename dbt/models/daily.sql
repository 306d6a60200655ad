-- One day of a project's views: counts, AI share, 7- and 28-day sums of complete days (over
-- calendar days: a day never exported counts as nothing), change against the same weekday a
-- week before; a day not complete (today) has its counts so far and no sums or change.
with days as (
    select
        project,
        date,
        human,
        ai,
        total,
        not {{ adapter.quote('final') }} as provisional,
        complete
    from ({{ marked(source('docpipe', 'site_totals'), 'page_views') }}) as t
),

windows as (
    select
        d.project,
        d.date,
        {{ total("case when e.date > " ~ days_after('d.date', -7) ~ " then e.human else 0 end") }} as human_7d,
        {{ total("case when e.date > " ~ days_after('d.date', -7) ~ " then e.ai else 0 end") }} as ai_7d,
        {{ total("case when e.date > " ~ days_after('d.date', -7) ~ " then e.total else 0 end") }} as total_7d,
        {{ total('e.human') }} as human_28d,
        {{ total('e.ai') }} as ai_28d,
        {{ total('e.total') }} as total_28d
    from days as d
    inner join days as e
        on e.project = d.project
        and e.date <= d.date
        and e.date > {{ days_after('d.date', -28) }}
        and e.complete
    where d.complete
    group by d.project, d.date
)

select
    d.project,
    d.date,
    d.human,
    d.ai,
    d.total,
    {{ share('d.ai', 'd.total') }} as ai_share,
    w.human_7d,
    w.ai_7d,
    w.total_7d,
    {{ share('w.ai_7d', 'w.total_7d') }} as ai_share_7d,
    w.human_28d,
    w.ai_28d,
    w.total_28d,
    {{ share('w.ai_28d', 'w.total_28d') }} as ai_share_28d,
    case when d.complete then b.total end as total_week_before,
    case when d.complete then {{ change('d.total', 'b.total') }} end as change_vs_week_before,
    d.complete,
    d.provisional
from days as d
left join windows as w
    on w.project = d.project and w.date = d.date
left join days as b
    on b.project = d.project
    and b.date = {{ days_after('d.date', -7) }}
    and b.complete
