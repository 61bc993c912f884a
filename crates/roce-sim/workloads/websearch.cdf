# WebSearch flow sizes: the web-search workload of Alizadeh et al., "Data Center TCP (DCTCP)",
# SIGCOMM 2010, as later used by pFabric (SIGCOMM 2013) and HPCC (SIGCOMM 2019).
# Points as distributed in alibaba-edu/High-Precision-Congestion-Control traffic_gen/ (2020),
# file WebSearch_distribution.txt.
# Format: one point per line, `<flow size in bytes> <cumulative percent>`; first `0 0`, last
# percent 100, both columns strictly increasing; sizes between points by linear interpolation.
# Mean (trapezoid rule): 1711250 bytes.
0 0
10000 15
20000 20
30000 30
50000 40
80000 53
200000 60
1000000 70
2000000 80
5000000 90
10000000 97
30000000 100
