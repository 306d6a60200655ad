-- One ISO week of a project's views: complete when its 7 days are; change against the week
-- before when both are complete.
with weeks as (
    select
        project,
        {{ iso_week_columns() }},
        {{ total('human') }} as human,
        {{ total('ai') }} as ai,
        {{ total('total') }} as total,
        {{ every('complete') }} and count(*) = 7 as complete,
        {{ some('provisional') }} as provisional
    from {{ ref('daily') }}
    group by project, {{ week_start('date') }}
)

select
    w.project,
    w.iso_year,
    w.iso_week,
    w.week_start,
    w.days,
    w.human,
    w.ai,
    w.total,
    {{ share('w.ai', 'w.total') }} as ai_share,
    b.total as total_week_before,
    case when w.complete and b.complete then {{ change('w.total', 'b.total') }} end
        as change_vs_week_before,
    w.complete,
    w.provisional
from weeks as w
left join weeks as b
    on b.project = w.project
    and b.week_start = {{ days_after('w.week_start', -7) }}
