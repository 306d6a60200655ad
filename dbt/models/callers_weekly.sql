-- One ISO week of the assistant's callers (counts, additive over days): web, API, other, total,
-- each one's share of the total, and the days of the week exported.
with days as (
    {{ marked(source('docpipe', 'assistant_callers'), 'caller_stats') }}
),

weeks as (
    select
        project,
        {{ iso_week_columns() }},
        {{ total('web') }} as web,
        {{ total('api') }} as api,
        {{ total('other') }} as other,
        {{ total('total') }} as total,
        {{ every('complete') }} and count(*) = 7 as complete
    from days
    group by project, {{ week_start('date') }}
)

select
    project,
    iso_year,
    iso_week,
    week_start,
    days,
    web,
    api,
    other,
    total,
    {{ share('web', 'total') }} as web_share,
    {{ share('api', 'total') }} as api_share,
    {{ share('other', 'total') }} as other_share,
    complete
from weeks
